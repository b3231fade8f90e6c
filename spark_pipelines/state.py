"""A table's state read from the log: its schema history, its text state, and the LSN
that stands for a point in time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from .columns import Column, TableColumns, table_columns
from .log_range import read_range
from .materialize import current_state, event_type
from .source import EndOffsets, LogSource


class ReplayError(Exception):
    """A job cannot run as asked; the message says what to change."""


@dataclass(slots=True)
class TableHistory:
    """Every schema version of one table; the newest decides the output's columns."""

    newest: TableColumns
    versions: dict[int, TableColumns] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.newest.name

    def all_columns(self) -> list[Column]:
        """The newest columns, then those only older versions had (dropped since)."""
        seen = {c.name: c for c in self.newest.columns}
        for version in sorted(self.versions, reverse=True):
            for column in self.versions[version].columns:
                seen.setdefault(column.name, column)
        return list(seen.values())

    def columns_at(self, version: int) -> tuple[Column, ...]:
        """The columns an event of schema ``version`` carries (the newest if unknown)."""
        known = self.versions.get(version)
        return known.columns if known is not None else self.newest.columns


def load_histories(source: LogSource) -> dict[str, TableHistory]:
    """``schema.table`` → its schema history, from the schema topic (read by the log's own
    reader: a record per table and schema version, not worth a Spark job)."""
    histories: dict[str, TableHistory] = {}
    ends = source.end_offsets(source.schema_topic)
    for message in read_range(source, source.schema_topic, {}, ends):
        if message.tombstone:
            continue
        columns = table_columns(orjson.loads(message.value))
        history = histories.setdefault(columns.name, TableHistory(columns))
        history.versions[columns.version] = columns
        if columns.version >= history.newest.version:
            history.newest = columns
    return histories


def select_tables(histories: Mapping[str, TableHistory], wanted: Sequence[str],
                  configured: Sequence[str]) -> list[TableHistory]:
    """The tables a job works on: ``--tables``, else ``source.tables``, else every table
    with a schema record. An unknown name is an error listing the known ones."""
    names = list(wanted) or list(configured) or sorted(histories)
    missing = [name for name in names if name not in histories]
    if missing:
        known = ", ".join(sorted(histories)) or "none yet"
        raise ReplayError(f"--tables: no schema record of {', '.join(missing)} in the log's "
                          f"schema topic (known: {known}); has the capture seen a change of it?")
    return [histories[name] for name in names]


def text_row(history: TableHistory) -> StructType:
    """An event's ``after`` as the jobs read it: every column of every schema version of
    the table, each as the event's text."""
    return StructType([StructField(c.name, StringType()) for c in history.all_columns()])


def text_state(spark: SparkSession, source: LogSource, history: TableHistory,
               ends: EndOffsets, *, as_of_lsn: int | None = None,
               with_deletes: bool = False, starts: EndOffsets | None = None) -> DataFrame:
    """The table's current state with every column as the event's text (``columns``);
    with ``starts``, the state the log's records from those offsets leave."""
    row = text_row(history)
    records = source.read(spark, source.topic(history.name), event_type(row), ends, starts)
    return current_state(records, row.fieldNames(), as_of_lsn=as_of_lsn,
                         with_deletes=with_deletes)


def lsn_at(spark: SparkSession, source: LogSource, topics: Mapping[str, EndOffsets],
           when: datetime) -> int:
    """The newest commit LSN committed at or before ``when`` in these topics (0: none)."""
    value = StructType([StructField("source", StructType([
        StructField("commit_ts", StringType())]))])
    newest = 0
    for topic, ends in topics.items():
        records = source.read(spark, topic, value, ends)
        found = (records.where(F.col("value.source.commit_ts").try_cast("timestamp")
                               <= F.lit(when))
                 .agg(F.max("lsn").cast(LongType()).alias("lsn")).collect()[0]["lsn"])
        newest = max(newest, int(found or 0))
    return newest
