"""``cdc reconcile --continuous``: the ``reconcile:`` section's check, every interval.

``cdc run`` starts it as a child beside the capture and the connectors. The first run
starts one ``interval`` after the start, each next one ``interval`` after the previous
one started (at once when a run took longer), reading at most ``rate`` rows per second.
Differences and the summary line go to the log; the counts go to
``cdc.observability.reconcile_metrics`` on the process's endpoint, which ``cdc run``
merges into its own (the status page shows the last summary line). A run that cannot
finish is logged and counted, and the next run comes as usual. It never repairs, so a
run in progress is simply abandoned when the process is told to stop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import click
from prometheus_client import CollectorRegistry

from cdc.config.commands import load_config_or_exit
from cdc.extras import MissingExtraError
from cdc.logsetup import configure_logging, protect_secrets
from cdc.observability.reconcile_metrics import ReconcileMetrics

from .check import Summary, describe_failure, reconcile_pipeline
from .plan import PlanError, chosen_connectors
from .run import target_class

log = logging.getLogger(__name__)

Check = Callable[[], Summary]
_WATCH_S = 0.5


def run_once(check: Check, metrics: ReconcileMetrics,
             clock: Callable[[], float] = time.time) -> Summary | None:
    """One run: its summary logged and counted; ``None`` (logged, counted) when it could
    not finish. A missing client library is not a run's failure: it is raised."""
    try:
        summary = check()
    except MissingExtraError:
        raise
    except Exception as exc:
        log.warning("reconcile: could not finish: %s", describe_failure(exc))
        metrics.unfinished(clock())
        return None
    log.log(logging.WARNING if summary.differences else logging.INFO, "%s", summary.line())
    metrics.finished(clock(), summary.tables, summary.rows, summary.counts)
    return summary


def run_every(check: Check, interval_s: float, stop: threading.Event,
              metrics: ReconcileMetrics, monotonic: Callable[[], float] = time.monotonic,
              clock: Callable[[], float] = time.time) -> None:
    """``run_once`` every ``interval_s`` (see the module docstring) until ``stop``."""
    start = monotonic() + interval_s
    while not stop.wait(max(0.0, start - monotonic())):
        start = monotonic() + interval_s
        run_once(check, metrics, clock)


def run_continuous(config_path: Path, names: tuple[str, ...], tables: tuple[str, ...],
                   rate: float | None, chunk: int, timeout: float, *, repair: bool) -> None:
    """The ``--continuous`` command (``--connector``, ``--table`` and ``--rate`` replace
    the section's choices)."""
    from cdc.observability import start_observability
    from cdc.signals import stop_on_signals

    if repair:
        raise click.UsageError("--continuous only reports; run --repair on its own")
    configure_logging()
    config = load_config_or_exit(config_path)
    protect_secrets(config)
    section = config.reconcile
    if section is None:
        raise click.UsageError(f"--continuous needs a reconcile: section in {config_path} "
                               "(interval, rate)")
    names, tables = names or section.connectors, tables or section.tables
    try:
        for connector in chosen_connectors(config, names):
            target_class(connector)  # a missing extra stops here, not at the first run
    except PlanError as exc:
        raise click.UsageError(str(exc)) from None
    metrics = ReconcileMetrics(CollectorRegistry())
    stop = stop_on_signals()
    endpoint = start_observability(config, registry=metrics.registry)

    def check() -> Summary:
        return reconcile_pipeline(config, connectors=names, tables=tables,
                                  rate=rate or section.rate, chunk=chunk, timeout=timeout,
                                  report=lambda line: log.warning("%s", line))

    log.info("reconciling every %s at %g rows/s", section.interval, rate or section.rate)
    try:
        watch(lambda: run_every(check, section.interval.total_seconds(), stop, metrics), stop)
    finally:
        if endpoint is not None:
            endpoint.stop()


def watch(work: Callable[[], None], stop: threading.Event) -> None:
    """Run ``work`` in a daemon thread until it returns or ``stop`` is set (then it is
    abandoned, mid-run if need be); re-raise what it raised."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            work()
        except BaseException as exc:  # re-raised in the calling thread
            failure.append(exc)

    worker = threading.Thread(target=target, name="reconcile", daemon=True)
    worker.start()
    while worker.is_alive() and not stop.wait(_WATCH_S):
        pass
    if failure:
        raise failure[0]
