"""Configuration: one ``pipeline.yaml``, validated into frozen pydantic models.

``load_config(path)`` returns a :class:`PipelineConfig` or raises
:class:`cdc.errors.ConfigError` listing every problem (YAML path, line, what was found,
what is expected; never a secret). ``config_json_schema()`` describes the file.
The field types (``Duration``, ``DataSize``, ``HttpUrl``) and ``ConfigModel`` are public
for the sinks' own config models.
"""

from cdc.config.base import ConfigModel, Loc, raise_field_problems
from cdc.config.connector import BackpressureConfig, ConnectorConfig, RetryConfig
from cdc.config.event_log import CompactionConfig, LogConfig, RetentionConfig
from cdc.config.fields import (
    DataSize,
    Duration,
    HttpUrl,
    RetentionSize,
    RetentionTime,
    literal_parts,
    template_validator,
    url_validator,
)
from cdc.config.loader import load_config, parse_config
from cdc.config.models import MetricsConfig, PipelineConfig, SparkConfig
from cdc.config.schema import config_json_schema
from cdc.config.source import SourceConfig

__all__ = [
    "BackpressureConfig",
    "CompactionConfig",
    "ConfigModel",
    "ConnectorConfig",
    "DataSize",
    "Duration",
    "HttpUrl",
    "Loc",
    "LogConfig",
    "MetricsConfig",
    "PipelineConfig",
    "RetentionConfig",
    "RetentionSize",
    "RetentionTime",
    "RetryConfig",
    "SourceConfig",
    "SparkConfig",
    "config_json_schema",
    "literal_parts",
    "load_config",
    "parse_config",
    "raise_field_problems",
    "template_validator",
    "url_validator",
]
