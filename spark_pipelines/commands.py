"""``cdc replay JOB``: the Spark jobs that rebuild from the log.

Jobs: ``materialize``, ``state-as-of``, ``rebuild-search``, ``rebuild-cache``,
``aggregates``. Every job takes ``-c FILE`` (the pipeline: where the log is),
``--master`` (default ``spark.master`` of the file, itself ``local[*]`` by default),
``--tables`` and ``--output``; stages and tasks show as progress bars, and a summary
table ends the run.
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click
import pyspark
from pyspark.sql import SparkSession
from rich.console import Console
from rich.table import Table

from cdc.capture.lsn import format_lsn, parse_lsn
from cdc.config import PipelineConfig
from cdc.config.commands import config_option, load_config_or_exit
from cdc.logsetup import configure_logging
from cdc.signals import stop_on_signals
from connectors.joins.foreign_keys import resolve_foreign_keys_or_exit
from derived import JoinedView

from .kafka_packages import with_kafka_source
from .materialize_job import TableResult, materialize_tables, output_dir
from .progress import stage_progress
from .session import spark_session
from .source import LogSource
from .state import ReplayError, TableHistory, load_histories, lsn_at, select_tables

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
_LSN = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}")


def _job_options(command: F) -> F:
    options = [
        config_option,
        click.option("--master", default=None,
                     help="Spark master URL (default: spark.master of the file, local[*])."),
        click.option("--tables", "tables", multiple=True,
                     help="schema.table, repeatable or comma-separated (default: "
                     "source.tables, else every captured table)."),
        click.option("--output", type=click.Path(path_type=Path), default=None,
                     help="Where datasets go (default: spark.output_path)."),
        click.option("--progress/--no-progress", default=True,
                     help="Show Spark stages and tasks as progress bars."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _as_of_option(required: bool) -> Callable[[F], F]:
    return click.option("--as-of", "as_of", required=required, default=None,
                        help="A commit LSN (0/16B37A0) or a time with a zone "
                        "(2026-11-21T10:00:00Z): the state committed at or before it.")


class ReplayRun:
    """What every job shares: the config, the log, the session, the console."""

    def __init__(self, config: PipelineConfig, spark: SparkSession, console: Console,
                 tables: tuple[str, ...], output: Path | None) -> None:
        self.config = config
        self.spark = spark
        self.console = console
        self.source = LogSource.of(config)
        self.output = output or config.spark.output_path
        self._wanted = tuple(t.strip() for arg in tables for t in arg.split(",") if t.strip())
        self._histories: dict[str, TableHistory] | None = None

    def histories(self) -> dict[str, TableHistory]:
        """Every table with a schema record, with its schema history (read once)."""
        if self._histories is None:
            self._histories = load_histories(self.source)
        return self._histories

    def forget_histories(self) -> None:
        """Read the schema topic again at the next ``histories``."""
        self._histories = None

    def tables(self) -> list[TableHistory]:
        """The tables the job works on, with their schema history."""
        return select_tables(self.histories(), self._wanted, self.config.source.tables or ())

    def joins(self, joins: tuple[JoinedView, ...], chosen: list[TableHistory]
              ) -> list[JoinedView]:
        """The joined views reading any of the ``chosen`` tables."""
        names = {history.name for history in chosen}
        return [view for view in joins
                if any(f"{schema}.{table}" in names for schema, table in view.tables())]

    def resolve_as_of(self, text: str, tables: list[TableHistory]) -> int:
        """``--as-of`` as a commit LSN (a time becomes the newest LSN at or before it)."""
        when = as_of_time(text)
        if when is None:
            return parse_lsn(text)
        topics = {self.source.topic(t.name): self.source.end_offsets(self.source.topic(t.name))
                  for t in tables}
        lsn = lsn_at(self.spark, self.source, topics, when)
        self.console.print(f"--as-of {text}: the newest commit at or before it is "
                           f"LSN {format_lsn(lsn)}")
        return lsn


def as_of_time(text: str) -> datetime | None:
    """``--as-of`` as a time, ``None`` when it is an LSN; ``ReplayError`` when it is
    neither an LSN nor an ISO time with a zone."""
    if _LSN.fullmatch(text):
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ReplayError(f"--as-of: {text!r} is neither an LSN nor an ISO time; give "
                          "an LSN like 0/16B37A0 or a time like 2026-11-21T10:00:00Z"
                          ) from None
    if when.tzinfo is None:
        raise ReplayError(f"--as-of: {text!r} has no time zone; add one, like "
                          f"{text}Z (UTC) or {text}+02:00")
    return when


@contextmanager
def _replay(config_path: Path, master: str | None, tables: tuple[str, ...],
            output: Path | None, progress: bool, job: str,
            as_of: str | None = None, *, delta: bool = False) -> Iterator[ReplayRun]:
    config = resolve_foreign_keys_or_exit(load_config_or_exit(config_path))
    if as_of is not None:
        try:  # a mistyped --as-of fails at once, not after Spark started and read the log
            as_of_time(as_of)
        except ReplayError as exc:
            raise click.ClickException(str(exc)) from None
    console = Console(stderr=True)
    conf: Mapping[str, object] = config.spark.conf
    if config.log.backend == "kafka":
        conf = with_kafka_source(conf, pyspark.__version__)
    if delta:
        from .lakehouse import with_delta

        conf = with_delta(conf)
    started = time.perf_counter()
    try:
        with spark_session(master or config.spark.master, conf,
                           app_name=f"distributary-{job}") as spark, \
                stage_progress(spark.sparkContext, console, progress):
            yield ReplayRun(config, spark, console, tables, output)
    except ReplayError as exc:
        raise click.ClickException(str(exc)) from None
    console.print(f"{job}: done in {time.perf_counter() - started:.1f}s")


def print_summary(run: ReplayRun, title: str, results: list[TableResult]) -> None:
    """One line per dataset (for scripts), then a table (for people)."""
    for result in results:
        for warning in result.warnings:
            run.console.print(f"[yellow]warning[/]: {warning}")
        click.echo(f"{result.name}: rows={result.rows} checksum={result.checksum} "
                   f"path={result.path}")
    table = Table(title=title)
    for heading in ("dataset", "rows", "checksum", "seconds", "path"):
        table.add_column(heading)
    for result in results:
        table.add_row(result.name, str(result.rows), result.checksum,
                      f"{result.seconds:.1f}", str(result.path))
    run.console.print(table)


@click.group("replay")
def replay() -> None:
    """Spark jobs over the log: materialize, state-as-of, versions, rebuild-search,
    rebuild-cache, aggregates.

    Example: cdc replay materialize -c pipeline.yaml --tables public.orders
    """


@replay.command("materialize")
@_job_options
@_as_of_option(required=False)
@click.option("--format", "table_format", type=click.Choice(["parquet", "delta"]),
              default="parquet", show_default=True,
              help="parquet: a fresh dataset per run. delta: a Delta Lake table per table, "
              "updated from the log position its last commit reached (time travel: Delta's "
              "versionAsOf; every commit's metadata names its log offsets and LSN).")
@click.option("--every", "every", type=float, default=None,
              help="With --format delta: seconds between updates; runs until stopped "
              "(default: one update).")
def materialize(config_path: Path, master: str | None, tables: tuple[str, ...],
                output: Path | None, progress: bool, as_of: str | None,
                table_format: str, every: float | None) -> None:
    """Each table's current state as Parquet or a Delta table, with row count and checksum.

    Example: cdc replay materialize -c pipeline.yaml --tables public.orders --format delta
    """
    if table_format == "delta" and as_of is not None:
        raise click.UsageError("--as-of with --format delta: a Delta table keeps its own "
                               "history; `cdc replay versions --as-of` names the version to "
                               "read with Delta's versionAsOf, or write Parquet with "
                               "state-as-of")
    if every is not None and table_format != "delta":
        raise click.UsageError("--every needs --format delta (a Parquet dataset is written "
                               "whole by each run)")
    with _replay(config_path, master, tables, output, progress, "materialize",
                 as_of, delta=table_format == "delta") as run:
        if table_format == "delta":
            _keep_delta_tables(run, every)
            return
        chosen = run.tables()
        lsn = run.resolve_as_of(as_of, chosen) if as_of else None
        print_summary(run, "materialized", materialize_tables(
            run.spark, run.source, chosen, run.output, as_of_lsn=lsn))


def _keep_delta_tables(run: ReplayRun, every: float | None) -> None:
    """Update the Delta tables once, or every ``every`` seconds until SIGTERM (a round
    that cannot run yet, before any schema record, waits for the next; a kill at any point
    leaves each table at its last commit)."""
    from .lakehouse import update_lakehouses

    if every is None:
        print_summary(run, "Delta tables", update_lakehouses(
            run.spark, run.source, run.tables(), run.output))
        return
    configure_logging()  # a long-running child of cdc run: log records, in its format
    stop = stop_on_signals()
    while not stop.is_set():
        try:
            run.forget_histories()  # a table's new schema version since the last round
            results = update_lakehouses(run.spark, run.source, run.tables(), run.output)
        except ReplayError as exc:
            log.info("lakehouse: waiting: %s", exc)
        else:
            for result in results:
                for warning in result.warnings[:-1]:  # columns kept as text
                    log.warning("lakehouse: %s", warning)
                if not result.warnings[-1].startswith(f"{result.name}: unchanged"):
                    log.info("lakehouse: %s: rows=%d checksum=%s", result.warnings[-1],
                             result.rows, result.checksum)
        stop.wait(every)


@replay.command("versions")
@_job_options
@_as_of_option(required=False)
def versions_command(config_path: Path, master: str | None, tables: tuple[str, ...],
                     output: Path | None, progress: bool, as_of: str | None) -> None:
    """The versions of each table's Delta table (materialize --format delta), newest first,
    with the log position each reached; with --as-of, the newest at or before it.

    Read one with Delta's versionAsOf; it holds the state as of its own LSN (for the state
    at an LSN between two versions: state-as-of).

    Example: cdc replay versions -c pipeline.yaml --tables public.orders --as-of 0/1A2B3C4
    """
    from .lakehouse import describe_version, version_at, versions

    with _replay(config_path, master, tables, output, progress, "versions", as_of,
                 delta=True) as run:
        chosen = run.tables()
        lsn = run.resolve_as_of(as_of, chosen) if as_of else None
        for history in chosen:
            target = run.output / history.name
            known = versions(run.spark, target)
            if lsn is not None:
                at = version_at(known, lsn)
                known = [at] if at is not None else []
            for version in known:
                click.echo(f"{history.name}: {describe_version(version)} path={target}")
            if not known:
                run.console.print(f"[yellow]warning[/]: {history.name}: no Delta version "
                                  + (f"at or before {format_lsn(lsn)} " if lsn else "")
                                  + f"at {target}")


@replay.command("class-archive")
@click.option("--force", is_flag=True, help="Build it again even if one exists.")
def class_archive(force: bool) -> None:
    """Build the JVM class archive every later job maps at start-up (about 3 s less per
    job; make setup runs this). One per JVM build and Spark version, under
    ~/.cache/distributary/spark-class-archive (or $DISTRIBUTARY_CLASS_ARCHIVE_DIR).

    Example: cdc replay class-archive
    """
    from .class_archive import archive_key, archive_path, build_archive, prune_other_archives

    key = archive_key()
    if key is None:
        raise click.ClickException("no java found (JAVA_HOME, or java on the PATH): Spark "
                                   "needs a JDK 17 or newer")
    target = archive_path(key)
    if target.is_file() and not force:
        click.echo(f"class archive: {target} exists ({target.stat().st_size >> 20} MiB)")
        return
    started = time.perf_counter()
    try:
        build_archive(target)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        raise click.ClickException(f"class archive: {exc}") from None
    click.echo(f"class archive: {target} ({target.stat().st_size >> 20} MiB) built in "
               f"{time.perf_counter() - started:.1f}s")
    for removed in prune_other_archives(target):
        click.echo(f"class archive: removed {removed.name} (another JVM or Spark's)")


@replay.command("state-as-of")
@_job_options
@_as_of_option(required=True)
def state_as_of(config_path: Path, master: str | None, tables: tuple[str, ...],
                output: Path | None, progress: bool, as_of: str) -> None:
    """Each table's state as of a commit LSN or time, as Parquet under as_of_<lsn>/.

    Example: cdc replay state-as-of -c pipeline.yaml --as-of 2026-11-21T10:00:00Z
    """
    with _replay(config_path, master, tables, output, progress, "state-as-of",
                 as_of) as run:
        chosen = run.tables()
        lsn = run.resolve_as_of(as_of, chosen)
        print_summary(run, f"state as of {format_lsn(lsn)}", materialize_tables(
            run.spark, run.source, chosen, run.output, as_of_lsn=lsn))


def _sink_config(run: ReplayRun, sink_type: str, name: str | None) -> tuple[str, Any]:
    """The validated config of the ``sink_type`` connector (``--connector`` picks one)."""
    found = [c for c in run.config.connectors if c.type == sink_type
             and (name is None or c.name == name)]
    if len(found) != 1:
        known = ", ".join(c.name for c in run.config.connectors if c.type == sink_type)
        what = f"named {name!r} " if name else ""
        problem = "no" if not found else "more than one"
        raise ReplayError(f"--connector: {problem} {sink_type} connector {what}in the pipeline "
                          f"file (found: {known or 'none'}); name one with --connector")
    return found[0].name, found[0].config


@replay.command("rebuild-search")
@_job_options
@click.option("--connector", default=None, help="The opensearch connector (if several).")
@click.option("--drop-old", is_flag=True, help="Delete the old index after the swap.")
def rebuild_search(config_path: Path, master: str | None, tables: tuple[str, ...],
                   output: Path | None, progress: bool, connector: str | None,
                   drop_old: bool) -> None:
    """Rebuild each table's OpenSearch index (and every joined view reading one of the
    tables) from the log and swap its alias atomically.

    Example: cdc replay rebuild-search -c pipeline.yaml --tables public.orders
    """
    from .join_rebuild import rebuild_joined_search
    from .search_rebuild import rebuild_table

    with _replay(config_path, master, tables, output, progress, "rebuild-search") as run:
        _, sink_config = _sink_config(run, "opensearch", connector)
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        results: list[TableResult] = []
        chosen = run.tables()
        roots = {view.source for view in sink_config.joins}
        for history in chosen:
            if history.name not in roots:  # a joined view's root table feeds only it
                results.extend(rebuild_table(run.spark, run.source, history, sink_config,
                                             drop_old=drop_old, stamp=stamp))
        for view in run.joins(sink_config.joins, chosen):
            results.append(rebuild_joined_search(run.spark, run.source, run.histories(), view,
                                                 sink_config, drop_old=drop_old, stamp=stamp))
        print_summary(run, "search indices rebuilt", results)


@replay.command("rebuild-cache")
@_job_options
@click.option("--connector", default=None, help="The redis connector (if several).")
def rebuild_cache(config_path: Path, master: str | None, tables: tuple[str, ...],
                  output: Path | None, progress: bool, connector: str | None) -> None:
    """Repopulate Redis from the log through the Redis sink's views and version guard
    (joined views reading one of the tables too).

    Example: cdc replay rebuild-cache -c pipeline.yaml --tables public.customers
    """
    from .cache_rebuild import rebuild_cache_table
    from .join_rebuild import rebuild_joined_cache

    with _replay(config_path, master, tables, output, progress, "rebuild-cache") as run:
        _, sink_config = _sink_config(run, "redis", connector)
        chosen = run.tables()
        roots = {view.source for view in sink_config.joins}
        results = [rebuild_cache_table(run.spark, run.source, history, sink_config)
                   for history in chosen if history.name not in roots]
        results.extend(rebuild_joined_cache(run.spark, run.source, run.histories(), view,
                                            sink_config)
                       for view in run.joins(sink_config.joins, chosen))
        print_summary(run, "cache rebuilt", results)


@replay.command("aggregates")
@_job_options
@_as_of_option(required=False)
@click.option("--aggregate", "names", multiple=True,
              help="Run only this aggregate of spark.aggregates (repeatable; default: all).")
def aggregates(config_path: Path, master: str | None, tables: tuple[str, ...],
               output: Path | None, progress: bool, as_of: str | None,
               names: tuple[str, ...]) -> None:
    """Each of spark.aggregates (Spark SQL over the materialized tables) as Parquet under
    OUTPUT/aggregates/NAME, with row count and checksum.

    The tables the queries name (or --tables) are materialized first; each is a view
    `schema.table` (in backticks) and, when unambiguous, plain table.

    Example: cdc replay aggregates -c compose/pipeline.yaml
    """
    from .aggregates import run_aggregates, select_aggregates, tables_read_by

    with _replay(config_path, master, tables, output, progress, "aggregates",
                 as_of) as run:
        chosen = select_aggregates(run.config.spark.aggregates, names, config_path)
        histories = run.tables()
        if not tables:
            histories = tables_read_by(chosen, histories)
        lsn = run.resolve_as_of(as_of, histories) if as_of else None
        materialized = materialize_tables(run.spark, run.source, histories, run.output,
                                          as_of_lsn=lsn)
        derived = run_aggregates(run.spark, chosen,
                                 {result.name: Path(result.path) for result in materialized},
                                 output_dir(run.output, lsn))
        print_summary(run, "aggregates", [*materialized, *derived])
