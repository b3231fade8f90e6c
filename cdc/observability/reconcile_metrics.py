"""The background reconcile's metrics (``cdc reconcile --continuous``, a child of ``cdc run``),
and its last result as the status page shows it.

    distributary_reconcile_rows_checked_total             rows compared with the sinks
    distributary_reconcile_differences_total{kind}        missing · extra · different
    distributary_reconcile_runs_total{outcome}            clean · different · unfinished
    distributary_reconcile_last_run_timestamp_seconds     when the last run ended
    distributary_reconcile_last_run_finished              0 when it could not finish
    distributary_reconcile_last_run_tables                tables the last run checked
    distributary_reconcile_last_run_rows                  rows the last run checked
    distributary_reconcile_last_run_differences{kind}     what the last run found

The reconcile process counts into ``ReconcileMetrics``; ``last_result`` reads the last run
back from scraped samples (the supervisor's merged families) as the summary line
``cdc reconcile`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.samples import Sample

P = "distributary_reconcile_"
KINDS = ("missing", "extra", "different")
OUTCOMES = ("clean", "different", "unfinished")


def summary_line(tables: int, rows: int, differences: Mapping[str, int]) -> str:
    """``reconcile: tables=N rows=N missing=N extra=N different=N``."""
    found = " ".join(f"{kind}={differences.get(kind, 0)}" for kind in KINDS)
    return f"reconcile: tables={tables} rows={rows} {found}"


class ReconcileMetrics:
    """The families above, registered in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.rows_checked = Counter(f"{P}rows_checked", "Rows compared with the sinks.",
                                    registry=registry)
        self.differences = Counter(f"{P}differences", "Differences found, by kind.",
                                   ["kind"], registry=registry)
        self.runs = Counter(f"{P}runs", "Runs, by outcome.", ["outcome"], registry=registry)
        self.last_at = Gauge(f"{P}last_run_timestamp_seconds",
                             "When the last run ended (seconds since the epoch).",
                             registry=registry)
        self.last_finished = Gauge(f"{P}last_run_finished",
                                   "1 when the last run finished, 0 when it could not.",
                                   registry=registry)
        self.last_tables = Gauge(f"{P}last_run_tables", "Tables the last run checked.",
                                 registry=registry)
        self.last_rows = Gauge(f"{P}last_run_rows", "Rows the last run checked.",
                               registry=registry)
        self.last_differences = Gauge(f"{P}last_run_differences",
                                      "Differences the last run found, by kind.", ["kind"],
                                      registry=registry)
        for kind in KINDS:  # every series exists from the start, at 0
            self.differences.labels(kind)
            self.last_differences.labels(kind)
        for outcome in OUTCOMES:
            self.runs.labels(outcome)

    def finished(self, at: float, tables: int, rows: int, differences: Mapping[str, int]) -> None:
        """Count a run that compared ``rows`` rows of ``tables`` tables."""
        self.rows_checked.inc(rows)
        for kind in KINDS:
            self.differences.labels(kind).inc(differences.get(kind, 0))
            self.last_differences.labels(kind).set(differences.get(kind, 0))
        self.runs.labels("different" if any(differences.values()) else "clean").inc()
        self.last_tables.set(tables)
        self.last_rows.set(rows)
        self.last_finished.set(1)
        self.last_at.set(at)

    def unfinished(self, at: float) -> None:
        """Count a run that could not finish (a server unreachable, a catch-up timed out)."""
        self.runs.labels("unfinished").inc()
        self.last_finished.set(0)
        self.last_at.set(at)


def last_result(samples: Iterable[Sample]) -> dict[str, Any] | None:
    """The last run for ``/status.json``: ``{"at", "finished", "summary"}`` (``summary``:
    the summary line, ``None`` when the run could not finish); ``None`` before any run."""
    values: dict[str, float] = {}
    found: dict[str, int] = {}
    for sample in samples:
        if sample.name == f"{P}last_run_differences":
            found[sample.labels.get("kind", "")] = int(sample.value)
        elif sample.name.startswith(f"{P}last_run_"):
            values[sample.name.removeprefix(f"{P}last_run_")] = sample.value
    at = values.get("timestamp_seconds")
    if not at:
        return None
    finished = bool(values.get("finished"))
    summary = summary_line(int(values.get("tables", 0)), int(values.get("rows", 0)), found)
    return {"at": at, "finished": finished, "summary": summary if finished else None}
