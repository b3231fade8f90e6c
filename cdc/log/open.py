"""Open the log a pipeline's ``log:`` section describes."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from cdc.errors import LogError
from cdc.extras import MissingExtraError, missing_extra

from .contract import Log
from .file import FileLog, FileLogSettings

if TYPE_CHECKING:
    from cdc.config.event_log import LogConfig


def file_settings(config: LogConfig) -> FileLogSettings:
    """The file backend's settings from the ``log:`` section."""
    retention_time = config.retention.time
    settings = FileLogSettings(
        default_partitions=config.partitions,
        segment_bytes=config.segment_bytes,
        fsync=config.fsync,
        retention_ms=(int(retention_time.total_seconds() * 1000)
                      if retention_time is not None else None),
        retention_bytes=config.retention.size,
        open_files=config.open_files,
        session_timeout_s=config.group_session_timeout.total_seconds(),
    )
    if config.compaction is None:
        return settings
    return replace(settings, compact_all_topics=True,
                   compaction_interval_ms=int(config.compaction.interval.total_seconds() * 1000),
                   min_dirty_ratio=config.compaction.min_dirty_ratio)


def open_log(config: LogConfig) -> Log:
    """A ``FileLog`` or a Kafka log, as configured. A Kafka log is reached once first:
    a login, certificate or protocol the cluster refuses raises ``ConfigError`` naming
    the ``log.*`` setting (a cluster that does not answer is left to the retries)."""
    if config.backend == "file":
        assert config.path is not None  # the config model requires it
        return FileLog(config.path, file_settings(config))
    check_backend(config)
    from .kafka import KafkaLog
    from .kafka.access import check_access
    from .kafka.admin import Replication
    from .kafka.security import client_security

    servers = ",".join(config.bootstrap_servers)
    security = client_security(config)
    check_access({"bootstrap.servers": servers, **security}, servers)
    return KafkaLog(config.bootstrap_servers, default_partitions=config.partitions,
                    client_config=security, max_record_bytes=config.max_record_bytes,
                    replication=Replication(config.replication_factor,
                                            config.min_insync_replicas),
                    session_timeout_ms=int(config.group_session_timeout.total_seconds() * 1000))


def check_backend(config: LogConfig) -> None:
    """Fail now, without opening anything, when ``open_log`` could not open the backend:
    ``LogError`` for a Kafka log without servers, ``MissingExtraError`` without its extra."""
    if config.backend == "file":
        return
    if not config.bootstrap_servers:
        raise LogError("log.bootstrap_servers: required when backend is 'kafka'")
    try:
        from . import kafka  # noqa: F401
    except ImportError as exc:
        extra = missing_extra(exc)
        if extra is None:
            raise
        raise MissingExtraError("log.backend 'kafka'", extra) from None
