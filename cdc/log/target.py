"""Which log a ``cdc log`` command reads: ``--path DIR`` (file backend),
``--bootstrap-servers HOST:PORT,…`` (Kafka) or the ``log:`` section of ``-c FILE``.

Topics, offsets and group lag go through the ``Log`` contract; reading a topic outside
any group (``dump``, ``tail``) uses each backend's topic reader, which share one interface
and one order (partitions merged by source position).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import click
from pydantic import ValidationError

from cdc.config.commands import ConfigErrorExit
from cdc.errors import ConfigError, LogError

from .open import open_log
from .records import Message

if TYPE_CHECKING:
    from cdc.config.event_log import LogConfig

    from .contract import Log


class TopicCursor(Protocol):
    """Cursors on the partitions of one topic, outside any consumer group."""

    def seek(self, where: str | int) -> None:
        """Start at ``earliest``, ``latest`` or an offset."""

    def read_available(self, until: int | None = None) -> Iterator[Message]:
        """Everything there now, merged across partitions in source-position order."""

    def follow(self) -> Iterator[Message]:
        """Everything there now, then new records as they arrive."""

    def close(self) -> None:
        """Release the cursors."""


def log_config(config_path: Path, path: Path | None, servers: str | None) -> LogConfig:
    """The ``log:`` section the options name (``--path``/``--bootstrap-servers`` win)."""
    from cdc.config.commands import load_config_or_exit
    from cdc.config.event_log import LogConfig

    if path is not None and servers is not None:
        raise click.UsageError("give --path (file log) or --bootstrap-servers (Kafka), "
                               "not both")
    try:
        if path is not None:
            return LogConfig(backend="file", path=path)
        if servers is not None:
            return LogConfig.model_validate({"backend": "kafka", "bootstrap_servers": servers})
    except ValidationError as exc:
        raise click.BadParameter(f"{servers!r}: expected 'host:port' of Kafka brokers, "
                                 "comma-separated", param_hint="--bootstrap-servers") from exc
    return load_config_or_exit(config_path).log


def where(config: LogConfig) -> str:
    """The log in words, for messages (no credentials: brokers are host:port)."""
    if config.backend == "file":
        return str(config.path)
    return "Kafka at " + ",".join(config.bootstrap_servers)


def open_log_or_exit(config: LogConfig) -> Log:
    """``open_log``; a login, certificate or protocol Kafka refused at the first contact
    (``ConfigError``) becomes one line naming the setting, exit status 2."""
    try:
        return open_log(config)
    except ConfigError as exc:
        raise ConfigErrorExit(str(exc)) from None


def open_target(config: LogConfig) -> Log:
    """The log, or a one-line error naming what is wrong."""
    try:
        return open_log_or_exit(config)
    except LogError as exc:
        raise click.ClickException(str(exc)) from None


def topic_cursor(config: LogConfig, topic: str, partition: int | None) -> TopicCursor:
    """Cursors on ``topic`` (one partition if given); a clear error if it does not exist."""
    partitions = None if partition is None else [partition]
    try:
        if config.backend == "file":
            from .file.tail import TopicReader

            assert config.path is not None  # the config model requires it
            return TopicReader(config.path, topic, partitions=partitions)
        log = open_target(config)  # first: a missing extra is named, not a traceback
        from .kafka import KafkaLog

        assert isinstance(log, KafkaLog)
        try:
            return log.topic_reader(topic, partitions=partitions)
        finally:
            log.close()
    except KeyError:
        what = f"topic {topic!r}" + ("" if partition is None else f" partition {partition}")
        raise click.ClickException(f"no {what} in {where(config)}") from None
    except LogError as exc:
        raise click.ClickException(str(exc)) from None
