"""``cdc log …``: topics, tail, dump, stats (file or Kafka backend); verify, repair,
columnar (file; ``columnar`` lives with the Spark jobs: the composition root adds it)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from cdc.config.commands import config_option, load_config_or_exit
from cdc.errors import LogError
from cdc.lazy_group import LazyGroup

from .file.verify import verify_log
from .open import open_log
from .records import Message, StartAt, StartKind
from .target import TopicCursor, log_config, open_target, topic_cursor

if TYPE_CHECKING:
    from cdc.config.event_log import LogConfig

    from .contract import Log


def _log_root(config_path: Path, path: Path | None) -> Path:
    if path is not None:
        return path
    config = load_config_or_exit(config_path)
    if config.log.backend != "file" or config.log.path is None:
        raise click.UsageError("this command checks the file backend's segments (Kafka "
                               "checks each record batch's CRC itself); give --path or a "
                               "config with log.backend: file")
    return config.log.path


F = TypeVar("F", bound=Callable[..., object])


def _path_option(command: F) -> F:
    return click.option("--path", type=click.Path(path_type=Path, file_okay=False),
                        help="the log directory (instead of -c FILE)")(command)


def _log_options(command: F) -> F:
    """``-c FILE``, ``--path DIR`` or ``--bootstrap-servers HOST:PORT,…``."""
    servers = click.option("--bootstrap-servers", "servers", metavar="HOST:PORT,…",
                           help="Kafka brokers of a Kafka log (instead of -c FILE)")
    return config_option(_path_option(servers(command)))


def _prefix_option(command: F) -> F:
    return click.option("--prefix", default="", metavar="TEXT",
                        help="only topics whose names start with TEXT (a Kafka cluster "
                        "may hold other pipelines' topics)")(command)


@click.group(name="log", cls=LazyGroup)  # + columnar, with the Spark jobs (cdc/cli.py)
def log_group() -> None:
    """Inspect the event log."""


@log_group.command()
@_log_options
@_prefix_option
def topics(config_path: Path, path: Path | None, servers: str | None, prefix: str) -> None:
    """List topics with their partitions, records and size (Kafka: size not shown)."""
    from rich.console import Console  # here: every other command starts ~40 ms sooner
    from rich.table import Table

    config = log_config(config_path, path, servers)
    log = open_target(config)
    try:
        admin = log.admin()
        table = Table("topic", "partitions", "records", "bytes")
        for topic in (t for t in admin.topics() if t.startswith(prefix)):
            infos = admin.partitions(topic)
            size = sum(i.size_bytes for i in infos)
            table.add_row(topic, str(len(infos)),
                          str(sum(i.end_offset - i.start_offset for i in infos)),
                          str(size) if config.backend == "file" else "-")
    except LogError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        log.close()
    Console().print(table)


def _start_option(default: str) -> Callable[[F], F]:
    return click.option("--from", "start", default=default, show_default=True,
                        help="earliest, latest or an offset")


def _check_start(start: str) -> None:
    if start not in ("earliest", "latest") and not start.isdigit():
        raise click.BadParameter(f"{start!r}: expected earliest, latest or an offset",
                                 param_hint="--from")


def _write(messages: Iterator[Message], limit: int | None, *, each: bool) -> None:
    """Print ``messages`` as JSON lines (flushing after each if ``each``), at most ``limit``."""
    out = sys.stdout.buffer
    written = 0
    try:
        for message in messages:
            out.write(message.value + b"\n")
            written += 1
            if each:
                out.flush()
            if written == limit:
                break
    except LogError as exc:  # LogCorruptionError names topic, partition and offset
        raise click.ClickException(str(exc)) from None
    finally:
        out.flush()


@log_group.command()
@_log_options
@click.argument("topic")
@click.option("--partition", type=int, default=None, help="only this partition")
@_start_option("earliest")
@click.option("--to", "until", type=int, default=None, help="stop before this offset")
def dump(config_path: Path, path: Path | None, servers: str | None, topic: str,
         partition: int | None, start: str, until: int | None) -> None:
    """Print a topic's events as JSON lines, in commit order (nothing else on stdout)."""
    _check_start(start)
    reader = _positioned(log_config(config_path, path, servers), topic, partition, start)
    try:
        _write(reader.read_available(until), None, each=False)
    finally:
        reader.close()


def _positioned(config: LogConfig, topic: str, partition: int | None,
                start: str) -> TopicCursor:
    """Cursors on ``topic`` at ``start``."""
    reader = topic_cursor(config, topic, partition)
    try:
        reader.seek(start)
    except LogError as exc:
        reader.close()
        raise click.ClickException(str(exc)) from None
    return reader


@log_group.command()
@_log_options
@click.argument("topic")
@click.option("--group", default=None, help="read as a member of this consumer group")
@_start_option("latest")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="stop after this many events (default: until Ctrl-C)")
def tail(config_path: Path, path: Path | None, servers: str | None, topic: str,
         group: str | None, start: str, limit: int | None) -> None:
    """Follow a topic, printing new events as they arrive, until Ctrl-C."""
    config = log_config(config_path, path, servers)
    try:
        if group is None:
            _check_start(start)
            reader = _positioned(config, topic, None, start)
            try:
                _write(reader.follow(), limit, each=True)
            finally:
                reader.close()
        else:
            _tail_group(open_target(config), topic, group, start, limit)
    except KeyboardInterrupt:
        pass


def _tail_group(log: Log, topic: str, group: str, start: str, limit: int | None) -> None:
    """Read ``topic`` as a member of ``group``, committing what was printed."""
    fallback = StartKind.LATEST if start == "latest" else StartKind.EARLIEST
    consumer = log.consumer(group, topics=[topic], start=StartAt.committed(fallback=fallback))
    out = sys.stdout.buffer
    left = limit
    try:
        while left is None or left > 0:
            batch = consumer.poll(500 if left is None else min(500, left), timeout=1.0)
            for message in batch:
                out.write(message.value + b"\n")
            out.flush()
            consumer.commit()
            if left is not None:
                left -= len(batch)
    except LogError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        consumer.close()
        log.close()


@log_group.command()
@_log_options
@_prefix_option
def stats(config_path: Path, path: Path | None, servers: str | None, prefix: str) -> None:
    """Sizes and offsets per partition, and lag per consumer group (Kafka: size not shown,
    every group of the cluster)."""
    from rich.console import Console
    from rich.table import Table

    config = log_config(config_path, path, servers)
    log = open_target(config)
    table = Table("topic", "partition", "start", "end", "bytes")
    lags = Table("group", "topic", "partition", "committed", "end", "lag")
    try:
        admin = log.admin()
        for topic in (t for t in admin.topics() if t.startswith(prefix)):
            for info in admin.partitions(topic):
                table.add_row(topic, str(info.partition), str(info.start_offset),
                              str(info.end_offset),
                              str(info.size_bytes) if config.backend == "file" else "-")
        for group in admin.groups():
            for lag in (g for g in admin.group_lag(group) if g.topic.startswith(prefix)):
                lags.add_row(group, lag.topic, str(lag.partition), str(lag.committed),
                             str(lag.end_offset), str(lag.lag))
    except LogError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        log.close()
    console = Console()
    console.print(table)
    console.print(lags)


@log_group.command()
@config_option
@_path_option
def verify(config_path: Path, path: Path | None) -> None:
    """Check every record's checksum and order; print each problem with its place."""
    report = verify_log(_log_root(config_path, path))
    for problem in report.problems:
        click.echo(str(problem))
    click.echo(f"verified {report.records} records in {report.segments} segments: "
               f"{len(report.problems)} problems")
    if report.problems:
        sys.exit(1)



@log_group.command()
@config_option
@_path_option
@click.option("--yes", is_flag=True, help="repair without asking")
def repair(config_path: Path, path: Path | None, yes: bool) -> None:
    """Keep the valid records of damaged segments; move the originals to _quarantine."""
    from .file.repair import repair_log

    root = _log_root(config_path, path)
    if not yes:
        click.confirm(f"Repair the log at {root}? Corrupt records are dropped from it "
                      "(the original segments are kept in _quarantine)", abort=True)
    actions = repair_log(root)
    for action in actions:
        click.echo(f"{action.segment}: kept {action.kept}, dropped {action.dropped}; "
                   f"original at {action.quarantined_as}")
    click.echo(f"repaired {len(actions)} segments")


__all__ = ["log_group", "open_log"]
