"""``cdc log columnar``: write the Parquet companions of the file log's sealed segments
(``columnar_job``) or of a Kafka log's offsets (``kafka_columnar_job``), once or every
``--every`` seconds.

It runs beside the capture, never on its path: its own process, a Spark session on one
core by default (``--master local[1]``), reading only segments the capture no longer
writes.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import click
import pyspark
from pyspark.sql import SparkSession
from rich.console import Console

from cdc.config.commands import config_option, load_config_or_exit
from cdc.errors import LogError

from .columnar import case_clashes
from .columnar_job import ColumnarBusy, TopicColumns, companion_lock, write_companions
from .companions import columnar_root
from .kafka_columnar_job import DEFAULT_CHUNK_OFFSETS, write_chunks
from .kafka_packages import with_kafka_source
from .session import spark_session
from .source import LogSource
from .state import ReplayError, TableHistory, load_histories, select_tables


def topics_to_convert(source: LogSource, tables: list[TableHistory]) -> list[TopicColumns]:
    """Each topic of ``tables``, with the row columns of every schema version of every
    table written to it, and the newest schema version among them."""
    by_topic: dict[str, list[TableHistory]] = defaultdict(list)
    for history in tables:
        by_topic[source.topic(history.name)].append(history)
    found = []
    for topic, histories in sorted(by_topic.items()):
        columns: dict[str, None] = {}
        for history in histories:
            columns.update(dict.fromkeys(c.name for c in history.all_columns()))
        found.append(TopicColumns(topic, tuple(columns),
                                  max(h.newest.version for h in histories)))
    return found


def one_round(spark: SparkSession, source: LogSource, wanted: tuple[str, ...],
              configured: Sequence[str], console: Console, *, quiet: bool,
              chunk_offsets: int = DEFAULT_CHUNK_OFFSETS) -> None:
    """Write the missing companions of every chosen table's topic, a line per topic
    (``quiet``: only for topics where something was written, removed or left waiting)."""
    chosen = select_tables(load_histories(source), wanted, configured)
    for topic in topics_to_convert(source, chosen):
        clashes = case_clashes(topic.columns)
        if clashes:
            console.print(f"[yellow]warning[/]: {topic.topic}: columns {', '.join(clashes)} "
                          "differ only in case; its segments stay JSON only")
            continue
        if source.backend == "kafka":
            assert source.columnar_path is not None
            report = write_chunks(spark, source, source.columnar_path, topic, chunk_offsets)
        else:
            assert source.path is not None
            report = write_companions(spark, source.path, topic,
                                      sorted(source.end_offsets(topic.topic)))
        for reason in report.waiting:
            console.print(f"[yellow]waiting[/]: {topic.topic} {reason}")
        if not quiet or report.written or report.removed or report.waiting:
            click.echo(f"{topic.topic}: written={report.written} kept={report.kept} "
                       f"removed={report.removed} waiting={len(report.waiting)} "
                       f"seconds={report.seconds:.1f}")


@click.command("columnar")
@config_option
@click.option("--master", default="local[1]", show_default=True,
              help="Spark master URL (one core by default: it runs beside the capture).")
@click.option("--tables", "tables", multiple=True,
              help="schema.table, repeatable or comma-separated (default: source.tables, "
              "else every captured table).")
@click.option("--every", "every", type=float, default=None,
              help="Seconds between rounds; runs until stopped (default: one round).")
@click.option("--chunk-offsets", type=click.IntRange(min=1), default=DEFAULT_CHUNK_OFFSETS,
              show_default=True,
              help="Kafka log: offsets per chunk; a partition's newest offsets wait in Kafka "
              "until they fill one.")
def columnar(config_path: Path, master: str, tables: tuple[str, ...],
             every: float | None, chunk_offsets: int) -> None:
    """Write Parquet companions of the log (the file log's sealed segments, or chunks of a
    Kafka log's offsets under log.columnar_path); replay jobs read them instead of the
    JSON records.

    Example: cdc log columnar -c pipeline.yaml --every 60
    """
    config = load_config_or_exit(config_path)
    if config.log.path is not None:
        root = columnar_root(config.log.path)
    elif config.log.columnar_path is not None:
        root = config.log.columnar_path
    else:
        raise click.ClickException("log.columnar_path: not set; the companions of a Kafka "
                                   "log need a directory (like /data/distributary-columnar) "
                                   "where they are written and the Spark jobs read them")
    source = LogSource.of(config)
    conf: Mapping[str, object] = config.spark.conf
    if config.log.backend == "kafka":
        conf = with_kafka_source(conf, pyspark.__version__)
    wanted = tuple(t.strip() for arg in tables for t in arg.split(",") if t.strip())
    console = Console(stderr=True)
    try:
        with spark_session(master, conf, app_name="distributary-columnar") \
                as spark, companion_lock(root):
            while True:
                try:
                    one_round(spark, source, wanted, config.source.tables or (), console,
                              quiet=every is not None, chunk_offsets=chunk_offsets)
                except (ReplayError, LogError) as exc:
                    if every is None:
                        raise
                    console.print(f"[yellow]waiting[/]: {exc}")  # no schema record yet, or
                    # Kafka out of reach
                if every is None:
                    return
                time.sleep(every)
    except (ColumnarBusy, ReplayError, LogError) as exc:
        raise click.ClickException(str(exc)) from None
