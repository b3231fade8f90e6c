"""``cdc reconcile -c FILE``: prove the sinks hold what the tables say, and repair drift.

Prints one line per difference (``<kind> <table> <connector> <where> <id>: <what>``),
then ``reconcile: tables=N rows=N missing=N extra=N different=N``. Exit status: 0 when
clean, 1 when anything differs (also when ``--repair`` repaired it), 2 for usage or
configuration errors, 3 when the check could not finish (a sink or the database
unreachable, a connector not catching up within ``--timeout``).
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from pathlib import Path
from typing import NoReturn

import click

from cdc.config import PipelineConfig
from cdc.config.commands import config_option, load_config_or_exit
from cdc.errors import DistributaryError
from cdc.extras import MissingExtraError
from cdc.logsetup import configure_logging

from .plan import PlanError, TablePlan, plan_tables
from .run import reconcile_table

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
              "of their keys) and delete extra records under the current position.")
@click.option("--rate", type=click.FloatRange(min=1), default=None, metavar="ROWS/S",
              help="Read at most this many rows per second from PostgreSQL.")
@click.option("--chunk", type=click.IntRange(1, 10_000), default=1000, show_default=True,
              help="Rows per chunk (one mget / pipeline per chunk and target).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=120.0, show_default=True,
              metavar="SECONDS", help="How long to wait for the capture and the connectors "
              "to catch up with a chunk's read.")
def reconcile(config_path: Path, names: tuple[str, ...], tables: tuple[str, ...],
              repair: bool, rate: float | None, chunk: int, timeout: float) -> None:
    """Compare the sinks with the database, table by table, while writes continue.

    Each table is read in primary-key chunks, rendered as the capture renders rows, and
    compared with the same keys in each sink (through the connector's views, ids and key
    templates): a hash per chunk, rows one by one where it differs. A difference is
    checked again once the capture and the connector have caught up with a fresh read,
    and reported only if the row did not change meanwhile, so writes in flight are not
    drift. Rows a view filters out must be absent; with a Redis ttl an expired key is
    not drift. Exit status: 0 clean, 1 differences, 2 usage, 3 could not finish.

    \b
    Example:
      cdc reconcile -c pipeline.yaml
      cdc reconcile -c pipeline.yaml --connector search --table public.orders --repair
    """
    configure_logging(logging.WARNING)
    config = load_config_or_exit(config_path)
    totals: Counter[str] = Counter()
    try:
        plans = plan_tables(config, names, tables)
        for plan in plans:
            _check(config, plan, repair, rate, chunk, timeout, totals)
    except PlanError as exc:
        raise click.UsageError(str(exc)) from None
    except MissingExtraError:
        raise  # one line naming the extra, status 2 (cdc.lazy_group)
    except (DistributaryError, OSError) as exc:
        _unfinished(str(exc))
    except Exception as exc:  # a sink client's or the driver's own errors: one line
        _unfinished(f"{type(exc).__name__}: {exc}")
    click.echo(f"reconcile: tables={len(plans)} rows={totals['rows']} "
               f"missing={totals['missing']} extra={totals['extra']} "
               f"different={totals['different']}")
    if totals["missing"] or totals["extra"] or totals["different"]:
        sys.exit(EXIT_DIFFERENT)


def _unfinished(reason: str) -> NoReturn:
    click.echo(f"reconcile: could not finish: {' '.join(reason.split())}", err=True)
    sys.exit(EXIT_UNFINISHED)


def _check(config: PipelineConfig, plan: TablePlan, repair: bool, rate: float | None,
           chunk: int, timeout: float, totals: Counter[str]) -> None:
    outcome = reconcile_table(config, plan, repair=repair, rate=rate, chunk=chunk,
                              timeout=timeout)
    totals["rows"] += outcome.findings.rows
    for target, difference in outcome.findings.differences:
        click.echo(difference.line(f"{plan.table} {target.label}"))
        totals[difference.kind.value] += 1
    for line in outcome.repairs:
        click.echo(f"repair: {line}")
