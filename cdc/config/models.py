"""The whole ``pipeline.yaml``: source, log, connectors, spark, metrics and reconcile sections."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field, SecretStr, field_validator, model_validator

from cdc.config.base import ConfigModel, Loc, raise_field_problems
from cdc.config.connector import ConnectorConfig, duplicate_names
from cdc.config.event_log import LogConfig
from cdc.config.fields import Duration, ScalarText
from cdc.config.reconcile import ReconcileSection
from cdc.config.source import SourceConfig
from cdc.config.topic_names import TopicNamer


def _spark_key(key: str) -> str:
    if not key.startswith("spark."):
        raise ValueError("expected a Spark setting name starting with 'spark.'")
    return key


_AGGREGATE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,99}")
_LEADING_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.DOTALL)
_QUERY_STARTS = ("select", "with", "from", "table", "values", "(")


def _aggregate_name(value: str) -> str:
    if not _AGGREGATE_NAME.fullmatch(value):
        raise ValueError("expected a lowercase name of letters, digits and '_' (at most 100), "
                         "like 'orders_per_customer_day'; it names the output directory")
    return value


def _aggregate_sql(value: str) -> str:
    query = value.strip().rstrip(";").rstrip()
    body = _LEADING_COMMENTS.sub("", query)
    if not body:
        raise ValueError("expected a Spark SQL query, like \"SELECT customer_id, count(*) AS "
                         "orders FROM orders GROUP BY customer_id\"")
    if not body.lower().startswith(_QUERY_STARTS):
        raise ValueError("expected one query starting with SELECT, WITH, FROM, TABLE or "
                         "VALUES (an aggregate only reads the materialized tables)")
    return query


class AggregateConfig(ConfigModel):
    """A derived dataset: one Spark SQL query over the materialized tables.

    Each table is a temporary view named `schema.table` (write it in backticks) and, when
    no other schema has a table of that name, plain table.
    """

    name: Annotated[str, AfterValidator(_aggregate_name)] = Field(
        description="the dataset's name: `<output_path>/aggregates/<name>`")
    sql: Annotated[str, AfterValidator(_aggregate_sql)] = Field(
        description="a Spark SQL query, like \"SELECT customer_id, count(*) AS orders FROM "
        "`public.orders` GROUP BY customer_id\"")


class SparkConfig(ConfigModel):
    """Where the PySpark jobs run and write."""

    master: str = Field(default="local[*]", description="a Spark master URL; local[*] by default")
    output_path: Path = Field(default=Path(".data/spark"), description="where jobs write datasets")
    conf: dict[Annotated[str, AfterValidator(_spark_key)], ScalarText] = Field(
        default_factory=dict, description="extra Spark settings, e.g. spark.driver.memory: 2g")
    columnar_every: Duration | None = Field(
        default=None, description="`cdc run` also runs `cdc log columnar --every` this often "
        "(e.g. 60s): Parquet companions of the file log's sealed segments (or of Kafka "
        "offsets, under log.columnar_path) that the jobs read instead of JSON; needs the "
        "spark extra")
    lakehouse_every: Duration | None = Field(
        default=None, description="`cdc run` also runs `cdc replay materialize --format delta "
        "--every` this often (e.g. 5m): a Delta table per captured table under output_path, "
        "updated from the log offsets its last commit reached; needs the spark extra")
    aggregates: tuple[AggregateConfig, ...] = Field(
        default=(), description="derived datasets `cdc replay aggregates` computes with Spark "
        "SQL over the materialized tables, each written as Parquet to "
        "`<output_path>/aggregates/<name>`")

    @field_validator("aggregates")
    @classmethod
    def _unique_aggregates(cls, aggregates: tuple[AggregateConfig, ...]
                           ) -> tuple[AggregateConfig, ...]:
        first: dict[str, int] = {}
        problems: list[tuple[Loc, str, object]] = []
        for index, aggregate in enumerate(aggregates):
            if aggregate.name in first:
                problems.append(((index, "name"), f"{aggregate.name!r} is already the name of "
                                 f"aggregates[{first[aggregate.name]}]; names must be unique",
                                 aggregate.name))
            first.setdefault(aggregate.name, index)
        if problems:
            raise_field_problems("SparkConfig", problems)
        return aggregates


class MetricsConfig(ConfigModel):
    """Where the observability endpoint (/metrics, /healthz, the status page) listens."""

    host: str = Field(default="127.0.0.1", description="the address to bind; the default "
                      "keeps the endpoint on this machine")
    port: int = Field(ge=1, le=65535, description="the TCP port to bind")
    token: SecretStr | None = Field(
        default=None, description="a bearer token every request must send (Authorization: "
        "Bearer <token>), or use token_file; null: no token")
    sample_interval: Duration = Field(
        default=timedelta(seconds=2), description="how often the status page's samples and "
        "the slot's retained WAL are taken")


class CaptureConfig(ConfigModel):
    """The capture process; the same pipeline file may run as several replicas (Kafka
    log): one streams, the others stand by and take over."""

    takeover_after: Duration = Field(
        default=timedelta(seconds=6), description="a standby replica takes the slot over "
        "once the streaming one has sent PostgreSQL no status for this long (stalled, "
        "partitioned or its host gone), terminating its walsender rather than waiting for "
        "wal_sender_timeout; the streaming one reports every second, and the standby streams "
        "a second or two after it takes over")

    @field_validator("takeover_after")
    @classmethod
    def _above_reports(cls, value: timedelta) -> timedelta:
        if value < timedelta(seconds=3):
            raise ValueError(f"{value.total_seconds():g}s is too short: the streaming "
                             "replica reports every second; use at least 3s")
        return value


DEAD_LETTER_INFIX = "dlq"


def dead_letter_topic(topic_prefix: str, connector: str) -> str:
    """Where a connector puts the events its sink refused: ``<prefix>.dlq.<connector>``."""
    return f"{topic_prefix}.{DEAD_LETTER_INFIX}.{connector}"


class PipelineConfig(ConfigModel):
    """One ``pipeline.yaml``: capture ``source`` into ``log``, feed ``connectors``."""

    source: SourceConfig
    log: LogConfig
    connectors: tuple[ConnectorConfig, ...] = Field(
        default=(), description="the sinks fed from the log, each its own consumer group")
    spark: SparkConfig = Field(default_factory=SparkConfig)
    metrics: MetricsConfig | None = Field(default=None, description="null: no metrics endpoint")
    reconcile: ReconcileSection = Field(
        default=None, description="null: cdc run does not reconcile (cdc reconcile still does)")
    capture: CaptureConfig = Field(default_factory=CaptureConfig)

    @field_validator("connectors")
    @classmethod
    def _unique_names(cls, connectors: tuple[ConnectorConfig, ...]
                      ) -> tuple[ConnectorConfig, ...]:
        problems = duplicate_names(connectors)
        if problems:
            raise_field_problems("PipelineConfig", problems)
        return connectors

    @model_validator(mode="after")
    def _table_topics_are_not_internal(self) -> PipelineConfig:
        prefix = self.topic_prefix
        problems: list[tuple[Loc, str, object]] = [
            (("log", "topic_names", table), f"{topic!r} is a topic the pipeline itself uses "
             f"(<prefix>.messages, <prefix>._…, <prefix>.{DEAD_LETTER_INFIX}.…, __…); choose "
             "another name for this table's topic", topic)
            for table, topic in self.log.topic_names.items()
            if topic == f"{prefix}.messages" or topic.startswith(
                (f"{prefix}._", f"{prefix}.{DEAD_LETTER_INFIX}.", "__"))]
        if problems:
            raise_field_problems("PipelineConfig", problems)
        return self

    @model_validator(mode="after")
    def _columnar_needs_a_directory(self) -> PipelineConfig:
        every = self.spark.columnar_every
        if every is not None and self.log.backend == "kafka" and self.log.columnar_path is None:
            raise_field_problems("PipelineConfig", [(
                ("spark", "columnar_every"), "the companions of a Kafka log need a directory: "
                "set log.columnar_path, or remove columnar_every", every)])
        return self

    @property
    def topic_prefix(self) -> str:
        """The prefix of every topic name: ``log.topic_prefix``, else the slot name."""
        return self.log.topic_prefix or self.source.slot

    def is_dead_letter_topic(self, topic: str) -> bool:
        """True for a connector's dead-letter topic (the capture never writes those)."""
        return topic.startswith(dead_letter_topic(self.topic_prefix, ""))

    @property
    def topic_names(self) -> TopicNamer:
        """The naming of table topics (``cdc.config.topic_names``) for this pipeline."""
        return TopicNamer(self.topic_prefix, self.log.topic_names)

    def topic_for(self, schema: str, table: str) -> str:
        """The topic that holds the changes of ``schema.table`` (``topic_names``)."""
        return self.topic_names.topic_for(schema, table)
