"""Where a job reads the log: the file backend with Spark's Parquet and JSON readers
(``columnar``: a sealed segment's columnar companion when it has one, its JSON lines
otherwise), or Kafka through Spark's Kafka source. Both give the same columns:
``partition``, ``offset``, ``lsn``, ``seq`` (the source position), ``key`` (the key's
JSON text) and ``value`` (the event, typed by the schema a job asks for).

A job first takes the end offset of every partition (``end_offsets``) and reads only
below it, so everything it computes describes one prefix of the log even while the
capture keeps appending, and a rebuild knows where to resume from.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import orjson
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
)

from cdc.config import PipelineConfig
from cdc.config.event_log import LogConfig
from cdc.config.topic_names import TopicNamer
from cdc.log import Admin, Log
from cdc.log.file import FileLog

from .columnar import companion_records, read_records
from .kafka_companions import plan_chunks, topic_root
from .kafka_options import kafka_security_options
from .log_source import RECORD_COLUMNS, record_columns

if TYPE_CHECKING:
    from cdc.log.kafka.admin import KafkaAdmin

logger = logging.getLogger(__name__)

EndOffsets = Mapping[int, int]
FETCH_MAX_WAIT_MS = 10
"""How long the broker holds a job's fetch that finds no new record (the Java client's
500 ms by default). A job reads ranges that end at known offsets, so a fetch comes back
empty only at a range's edge, and each of a scan's tasks waited out the default there: a
count of 300 records over 3 partitions took 1.6 s, 0.6 s with 10 ms (a fetch that finds
records returns them at once either way)."""


@dataclass(frozen=True, slots=True)
class LogSource:
    """The log a pipeline writes, as a Spark job reads it."""

    backend: Literal["file", "kafka"]
    topic_prefix: str
    path: Path | None = None
    bootstrap_servers: tuple[str, ...] = ()
    topic_names: Mapping[str, str] = field(default_factory=dict)  # log.topic_names
    log: LogConfig | None = None
    """The whole ``log:`` section (its Kafka security settings), when read from a file."""
    columnar_path: Path | None = None
    """Kafka: where ``cdc log columnar`` writes the topics' chunks (``kafka_companions``)."""

    @classmethod
    def of(cls, config: PipelineConfig) -> LogSource:
        """The log of a pipeline file."""
        log = config.log
        return cls(log.backend, config.topic_prefix, log.path, tuple(log.bootstrap_servers),
                   dict(log.topic_names), log, log.columnar_path)

    def topic(self, table: str) -> str:
        """The topic of ``schema.table`` (the capture's rule: ``cdc.config.topic_names``)."""
        schema, _, name = table.partition(".")
        return TopicNamer(self.topic_prefix, self.topic_names).topic_for(schema, name)

    @property
    def schema_topic(self) -> str:
        return f"{self.topic_prefix}._schemas"

    def open_log(self) -> Log:
        """The log itself, for offsets and for reading past where a job stopped."""
        if self.backend == "file":
            assert self.path is not None
            return FileLog(self.path)
        if self.log is not None:  # its security settings, and the first-contact check
            from cdc.log.open import open_log

            return open_log(self.log)
        from cdc.log.kafka import KafkaLog

        return KafkaLog(self.bootstrap_servers)

    def kafka_options(self) -> dict[str, str]:
        """Spark's Kafka source options: the brokers and the security settings."""
        security = kafka_security_options(self.log) if self.log is not None else {}
        return {"kafka.bootstrap.servers": ",".join(self.bootstrap_servers), **security}

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Partition → the offset after its last record, now (empty if no such topic)."""
        return {partition: end for partition, (_, end) in self.offset_ranges(topic).items()}

    def offset_ranges(self, topic: str) -> dict[int, tuple[int, int]]:
        """Partition → (its first record still retained, the offset after its last), now
        (empty if no such topic)."""
        log = self.open_log()
        try:
            return _offset_ranges(log.admin(), topic)
        finally:
            log.close()

    def read(self, spark: SparkSession, topic: str, value_type: DataType,
             ends: EndOffsets, starts: EndOffsets | None = None) -> DataFrame:
        """The records of ``topic`` below ``ends`` (see the module docstring); with
        ``starts``, only those at or above those offsets (0 for a partition it lacks)."""
        starts = starts or {}
        if not any(end > starts.get(p, 0) for p, end in ends.items()):
            return spark.createDataFrame([], record_columns(value_type))
        if self.backend == "file":
            assert self.path is not None
            frame = read_records(spark, self.path, topic, value_type, ends, starts)
        else:
            frame = self._read_kafka(spark, topic, value_type, ends, starts)
        bound = F.lit(False)
        for partition, end in ends.items():
            bound = bound | ((F.col("partition") == partition) & (F.col("offset") < end)
                             & (F.col("offset") >= starts.get(partition, 0)))
        return frame.select(F.col("partition").cast(IntegerType()).alias("partition"),
                            *RECORD_COLUMNS[1:]).where(bound)

    def _read_kafka(self, spark: SparkSession, topic: str, value_type: DataType,
                    ends: EndOffsets, starts: EndOffsets) -> DataFrame:
        """From the topic's chunks (``log.columnar_path``) as far as they reach without a
        gap, from Kafka after them."""
        if self.columnar_path is None:
            return self.kafka_records(spark, topic, value_type, ends, starts)
        with self.kafka_admin() as admin:  # one connection for both questions
            retained = _offset_ranges(admin, topic)
            topic_id = admin.topic_id(topic)
        wanted = {p: (max(starts.get(p, 0), retained.get(p, (0, 0))[0]), end)
                  for p, end in ends.items()}
        chunks = plan_chunks(self.columnar_path, topic, topic_id, wanted)
        for problem in chunks.problems:
            logger.warning("not reading a columnar chunk of %s: %s; reading Kafka instead "
                           "(cdc log columnar writes it again)", topic, problem)
        parquet = companion_records(spark, chunks.files, topic_root(self.columnar_path, topic),
                                    chunks.columns, value_type) if chunks.files else None
        if parquet is None:
            return self.kafka_records(spark, topic, value_type, ends, starts)
        retained_only = F.lit(False)  # records retention removed from Kafka since
        for partition, (first, _) in wanted.items():
            retained_only = retained_only | ((F.col("partition") == partition)
                                             & (F.col("offset") >= first))
        parquet = parquet.where(retained_only)
        rest = {p: end for p, end in ends.items() if chunks.resume[p] < end}
        if not rest:
            return parquet
        return parquet.unionByName(
            self.kafka_records(spark, topic, value_type, rest, chunks.resume))

    def topic_id(self, topic: str) -> str:
        """Kafka: the topic's id (new when it was deleted and created again)."""
        with self.kafka_admin() as admin:
            return admin.topic_id(topic)

    @contextmanager
    def kafka_admin(self) -> Iterator[KafkaAdmin]:
        """Kafka: the log's admin client, for as long as the block runs."""
        from cdc.log.kafka.admin import KafkaAdmin

        log = self.open_log()
        try:
            admin = log.admin()
            assert isinstance(admin, KafkaAdmin)
            yield admin
        finally:
            log.close()

    def kafka_records(self, spark: SparkSession, topic: str, value_type: DataType,
                      ends: EndOffsets, starts: EndOffsets) -> DataFrame:
        """The records of ``topic``'s partitions in ``ends``, from ``starts`` (the earliest
        retained offset for a partition it lacks), from Kafka itself."""
        ending = orjson.dumps({topic: {str(p): end for p, end in ends.items()}}).decode()
        # -2: the earliest offset the broker still holds
        starting = orjson.dumps({topic: {str(p): starts.get(p, -2) for p in ends}}).decode()
        raw = (spark.read.format("kafka")
               .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))
               .options(**self.kafka_options())
               .option("assign", orjson.dumps({topic: sorted(ends)}).decode())
               .option("kafka.isolation.level", "read_committed")  # the capture's commits
               .option("startingOffsets", starting)
               .option("endingOffsets", ending)
               .option("includeHeaders", "true")
               .load())
        return kafka_columns(raw, value_type)



def kafka_columns(raw: DataFrame, value_type: DataType) -> DataFrame:
    """Spark's Kafka records as ``RECORD_COLUMNS`` (``value`` as ``value_type``); the
    position from the record's headers."""
    return raw.select(
        "partition", "offset",
        _header("lsn").alias("lsn"),
        F.coalesce(_header("seq"), F.lit(0).cast(LongType())).alias("seq"),
        F.col("key").cast(StringType()).alias("key"),
        _parsed(F.col("value").cast(StringType()), value_type).alias("value"))


def _parsed(text: Column, value_type: DataType) -> Column:
    if isinstance(value_type, StructType | ArrayType):
        return F.from_json(text, value_type, {"mode": "FAILFAST"})
    return text  # the raw JSON text, as the file reader gives a string field


def _header(name: str) -> Column:
    found = F.expr(f"try_element_at(filter(headers, h -> h.key = '{name}'), 1).value")
    return found.cast(StringType()).cast(LongType())


def _offset_ranges(admin: Admin, topic: str) -> dict[int, tuple[int, int]]:
    """``LogSource.offset_ranges`` through an open admin client."""
    if topic not in admin.topics():
        return {}
    return {info.partition: (info.start_offset, info.end_offset)
            for info in admin.partitions(topic)}
