"""``cdc reconcile -c FILE``: prove the sinks hold what the tables say, and repair drift.

Prints one line per difference (``<kind> <table> <connector> <where> <id>: <what>``),
then ``reconcile: tables=N rows=N missing=N extra=N different=N``. Exit status: 0 when
clean, 1 when anything differs (also when ``--repair`` repaired it), 2 for usage or
configuration errors, 3 when the check could not finish (a sink or the database
unreachable, a connector not catching up or a repair not landing within ``--timeout``).
``--continuous`` is the background check ``cdc run`` starts for a ``reconcile:`` section
(``continuous``).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import click

from cdc.config.commands import config_option, load_config_or_exit
from cdc.extras import MissingExtraError
from cdc.logsetup import configure_logging
from connectors.joins.foreign_keys import resolve_foreign_keys_or_exit

from .check import describe_failure, reconcile_pipeline
from .continuous import run_continuous
from .plan import PlanError

log = logging.getLogger(__name__)

EXIT_DIFFERENT = 1
EXIT_UNFINISHED = 3


@click.command(name="reconcile")
@config_option
@click.option("--connector", "names", multiple=True, metavar="NAME",
              help="Check only this connector (repeat for several); default: every "
              "opensearch and redis connector.")
@click.option("--table", "tables", multiple=True, metavar="SCHEMA.TABLE",
              help="Check only this table (repeat for several); default: every table the "
              "connectors consume.")
@click.option("--repair", is_flag=True,
              help="Send differing rows back through the pipeline (an incremental snapshot "
              "of their keys), delete extra records under the current position, and wait "
              "(at most --timeout) until the repair has reached the sinks.")
@click.option("--rate", type=click.FloatRange(min=1), default=None, metavar="ROWS/S",
              help="Read at most this many rows per second from PostgreSQL.")
@click.option("--chunk", type=click.IntRange(1, 10_000), default=5000, show_default=True,
              help="Rows per chunk (one COPY, and one MGET per Redis target, per chunk).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=120.0, show_default=True,
              metavar="SECONDS", help="How long to wait for the capture and the connectors "
              "to catch up with a chunk's read, and for a repair to land.")
@click.option("--continuous", is_flag=True,
              help="Check again every reconcile.interval at reconcile.rate rows/s (the "
              "pipeline file's reconcile: section; --connector, --table and --rate replace "
              "its choices) until stopped, reporting to the log and the metrics endpoint: "
              "what cdc run starts in the background.")
def reconcile(config_path: Path, names: tuple[str, ...], tables: tuple[str, ...],
              repair: bool, rate: float | None, chunk: int, timeout: float,
              continuous: bool) -> None:
    """Compare the sinks with the database, table by table, while writes continue.

    Each table is read in primary-key chunks, rendered as the capture renders rows, and
    compared with the same keys in each sink (through the connector's views, ids and key
    templates): a hash per chunk, rows one by one where it differs. A difference is
    checked again once the capture and the connector have caught up with a fresh read,
    and reported only if the row did not change meanwhile, so writes in flight are not
    drift. Rows a view filters out must be absent; with a Redis ttl an expired key is
    not drift. --repair waits until the repair has reached the sinks, so the next run is
    clean. Joined views (joins:) are checked too, one record per root row: PostgreSQL
    makes the joins from one snapshot of their tables, and --repair writes the records
    that differ under that snapshot's version. Exit status: 0 clean, 1 differences,
    2 usage, 3 could not finish.

    \b
    Example:
      cdc reconcile -c pipeline.yaml
      cdc reconcile -c pipeline.yaml --connector search --table public.orders --repair
    """
    if continuous:
        run_continuous(config_path, names, tables, rate, chunk, timeout, repair=repair)
        return
    configure_logging(logging.WARNING)
    config = resolve_foreign_keys_or_exit(load_config_or_exit(config_path))
    try:
        with without_cycle_collection():
            summary = reconcile_pipeline(config, connectors=names, tables=tables,
                                         repair=repair, rate=rate, chunk=chunk,
                                         timeout=timeout, report=click.echo)
    except PlanError as exc:
        raise click.UsageError(str(exc)) from None
    except MissingExtraError:
        raise  # one line naming the extra, status 2 (cdc.lazy_group)
    except Exception as exc:  # a server, a catch-up, a sink client's or driver's own error
        _unfinished(describe_failure(exc))
    click.echo(summary.line())
    if summary.differences:
        sys.exit(EXIT_DIFFERENT)


@contextlib.contextmanager
def without_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector off (a one-shot check only, not ``--continuous``
    inside ``cdc run``). A walk allocates millions of short-lived containers (keys,
    rows, pages) and makes no cycles worth collecting, and each collection walks every
    container alive, such as the rows waiting for their record: 40 % of a walk's
    time with the collector on. Reference counting still frees everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _unfinished(reason: str) -> NoReturn:
    click.echo(f"reconcile: could not finish: {reason}", err=True)
    sys.exit(EXIT_UNFINISHED)
