"""The whole ``pipeline.yaml``: source, log, connectors, spark and metrics sections."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator

from cdc.config.base import ConfigModel, raise_field_problems
from cdc.config.connector import ConnectorConfig, duplicate_names
from cdc.config.event_log import LogConfig
from cdc.config.fields import ScalarText
from cdc.config.source import SourceConfig


def _spark_key(key: str) -> str:
    if not key.startswith("spark."):
        raise ValueError("expected a Spark setting name starting with 'spark.'")
    return key


class SparkConfig(ConfigModel):
    """Where the PySpark jobs run and write."""

    master: str = Field(default="local[*]", description="a Spark master URL; local[*] by default")
    output_path: Path = Field(default=Path(".data/spark"), description="where jobs write datasets")
    conf: dict[Annotated[str, AfterValidator(_spark_key)], ScalarText] = Field(
        default_factory=dict, description="extra Spark settings, e.g. spark.driver.memory: 2g")


class MetricsConfig(ConfigModel):
    """Where the Prometheus metrics endpoint listens."""

    host: str = Field(default="127.0.0.1", description="the address to bind")
    port: int = Field(ge=1, le=65535, description="the TCP port to bind")


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

    @field_validator("connectors")
    @classmethod
    def _unique_names(cls, connectors: tuple[ConnectorConfig, ...]
                      ) -> tuple[ConnectorConfig, ...]:
        problems = duplicate_names(connectors)
        if problems:
            raise_field_problems("PipelineConfig", problems)
        return connectors

    @property
    def topic_prefix(self) -> str:
        """The prefix of every topic name: ``log.topic_prefix``, else the slot name."""
        return self.log.topic_prefix or self.source.slot

    def is_dead_letter_topic(self, topic: str) -> bool:
        """True for a connector's dead-letter topic (the capture never writes those)."""
        return topic.startswith(dead_letter_topic(self.topic_prefix, ""))

    def topic_for(self, schema: str, table: str) -> str:
        """The topic that holds the changes of ``schema.table``."""
        return f"{self.topic_prefix}.{schema}.{table}"
