"""Reconciling a whole pipeline: every planned table against its connectors, summed up.

``reconcile_pipeline`` is what ``cdc reconcile`` runs (tables, then joined views), once
or continuously, and what the chaos harness checks its sinks with; ``Summary.line()`` is
the command's summary line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cdc.config import PipelineConfig
from cdc.errors import DistributaryError
from cdc.observability.reconcile_metrics import KINDS, summary_line

from .plan import plan_joins, plan_tables
from .run import TableOutcome, reconcile_join, reconcile_table

Report = Callable[[str], None]


@dataclass
class Summary:
    """What a run checked and found: tables, rows, and differences by kind."""

    tables: int = 0
    rows: int = 0
    counts: Counter[str] = field(default_factory=Counter)  # kind (``Kind.value``) → count

    @property
    def differences(self) -> int:
        return sum(self.counts[kind] for kind in KINDS)

    def line(self) -> str:
        """``reconcile: tables=N rows=N missing=N extra=N different=N``."""
        return summary_line(self.tables, self.rows, self.counts)


def reconcile_pipeline(config: PipelineConfig, *, connectors: Sequence[str] = (),
                       tables: Sequence[str] = (), repair: bool = False,
                       rate: float | None = None, chunk: int = 5000, timeout: float = 120.0,
                       report: Report = lambda line: None) -> Summary:
    """Check (and with ``repair``, repair) the sinks of ``config``; each difference and
    repair goes to ``report`` as one line as soon as its table is done.

    Raises ``PlanError`` for names the pipeline does not have, ``MissingExtraError`` for
    a sink client that is not installed; any other error means the check could not
    finish (``describe_failure``).
    """
    plans = plan_tables(config, connectors, tables)
    joins = plan_joins(config, connectors, tables)
    summary = Summary(tables=len(plans) + len(joins))
    for plan in plans:
        _add(summary, reconcile_table(config, plan, repair=repair, rate=rate, chunk=chunk,
                                      timeout=timeout), plan.table, report)
    for join in joins:  # a joined view counts as a table, its root rows as its rows
        _add(summary, reconcile_join(config, join, repair=repair, timeout=timeout, rate=rate,
                                     chunk=chunk), join.table, report)
    return summary


def _add(summary: Summary, outcome: TableOutcome, table: str, report: Report) -> None:
    """Count ``outcome`` of ``table`` into ``summary``, reporting each difference and
    repair."""
    summary.rows += outcome.findings.rows
    for target, difference in outcome.findings.differences:
        report(difference.line(f"{table} {target.label}"))
        summary.counts[difference.kind.value] += 1
    for line in outcome.repairs:
        report(f"repair: {line}")


def describe_failure(error: Exception) -> str:
    """Why a check could not finish, on one line (a client's own errors by their type)."""
    text = str(error) if isinstance(error, DistributaryError | OSError) \
        else f"{type(error).__name__}: {error}"
    return " ".join(text.split())
