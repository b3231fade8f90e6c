"""``cdc log …``: topics, tail, dump, stats, verify."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click
from rich.console import Console
from rich.table import Table

from cdc.config.commands import config_option, load_config_or_exit
from cdc.errors import LogCorruptionError

from .file.tail import TopicReader
from .file.verify import verify_log
from .open import open_log


def _log_root(config_path: Path, path: Path | None) -> Path:
    if path is not None:
        return path
    config = load_config_or_exit(config_path)
    if config.log.backend != "file" or config.log.path is None:
        raise click.UsageError("these commands read the file backend; give --path or a "
                               "config with log.backend: file")
    return config.log.path


F = TypeVar("F", bound=Callable[..., object])


def _path_option(command: F) -> F:
    return click.option("--path", type=click.Path(path_type=Path, file_okay=False),
                        help="the log directory (instead of -c FILE)")(command)


@click.group(name="log")
def log_group() -> None:
    """Inspect the event log."""


@log_group.command()
@config_option
@_path_option
def topics(config_path: Path, path: Path | None) -> None:
    """List topics with their partitions, records and size."""
    root = _log_root(config_path, path)
    from .file import FileLog

    admin = FileLog(root).admin()
    table = Table("topic", "partitions", "records", "bytes")
    for topic in admin.topics():
        infos = admin.partitions(topic)
        table.add_row(topic, str(len(infos)),
                      str(sum(i.end_offset - i.start_offset for i in infos)),
                      str(sum(i.size_bytes for i in infos)))
    Console().print(table)


@log_group.command()
@config_option
@_path_option
@click.argument("topic")
@click.option("--partition", type=int, default=None, help="only this partition")
@click.option("--from", "start", default="earliest", show_default=True,
              help="earliest, latest or an offset")
@click.option("--to", "until", type=int, default=None, help="stop before this offset")
def dump(config_path: Path, path: Path | None, topic: str, partition: int | None,
         start: str, until: int | None) -> None:
    """Print a topic's events as JSON lines, in commit order (nothing else on stdout)."""
    reader = _topic_reader(_log_root(config_path, path), topic, partition, start)
    out = sys.stdout.buffer
    try:
        for message in reader.read_available(until):
            out.write(message.value + b"\n")
    except LogCorruptionError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        out.flush()
        reader.close()


@log_group.command()
@config_option
@_path_option
@click.argument("topic")
@click.option("--group", default=None, help="read as a member of this consumer group")
@click.option("--from", "start", default="latest", show_default=True,
              help="earliest, latest or an offset")
def tail(config_path: Path, path: Path | None, topic: str, group: str | None,
         start: str) -> None:
    """Follow a topic, printing new events as they arrive, until Ctrl-C."""
    root = _log_root(config_path, path)
    out = sys.stdout.buffer
    try:
        if group is None:
            reader = _topic_reader(root, topic, None, start)
            for message in reader.follow():
                out.write(message.value + b"\n")
                out.flush()
        else:
            _tail_group(root, topic, group, start)
    except KeyboardInterrupt:
        pass


def _tail_group(root: Path, topic: str, group: str, start: str) -> None:
    from .file import FileLog
    from .records import StartAt, StartKind

    fallback = StartKind.LATEST if start == "latest" else StartKind.EARLIEST
    consumer = FileLog(root).consumer(group, topics=[topic],
                                      start=StartAt.committed(fallback=fallback))
    out = sys.stdout.buffer
    try:
        while True:
            for message in consumer.poll(500, timeout=1.0):
                out.write(message.value + b"\n")
            out.flush()
            consumer.commit()
    finally:
        consumer.close()


def _topic_reader(root: Path, topic: str, partition: int | None, start: str) -> TopicReader:
    try:
        reader = TopicReader(root, topic, partitions=None if partition is None else [partition])
    except KeyError:
        raise click.ClickException(f"no topic {topic!r} in {root}") from None
    if start not in ("earliest", "latest") and not start.isdigit():
        raise click.BadParameter(f"{start!r}: expected earliest, latest or an offset",
                                 param_hint="--from")
    reader.seek(start)
    return reader


@log_group.command()
@config_option
@_path_option
def stats(config_path: Path, path: Path | None) -> None:
    """Sizes and offsets per partition, and lag per consumer group."""
    from .file import FileLog

    admin = FileLog(_log_root(config_path, path)).admin()
    console = Console()
    table = Table("topic", "partition", "start", "end", "bytes")
    for topic in admin.topics():
        for info in admin.partitions(topic):
            table.add_row(topic, str(info.partition), str(info.start_offset),
                          str(info.end_offset), str(info.size_bytes))
    console.print(table)
    lags = Table("group", "topic", "partition", "committed", "end", "lag")
    for group in admin.groups():
        for lag in admin.group_lag(group):
            lags.add_row(group, lag.topic, str(lag.partition), str(lag.committed),
                         str(lag.end_offset), str(lag.lag))
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
