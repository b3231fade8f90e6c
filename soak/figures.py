"""The soak's samples and the figures it prints from them.

Times are seconds since the workload started. A run is cut into a warm-up (not judged)
and three equal thirds after it; growth compares the median of the last third with the
median of the first, per process role (a process restarted keeps its role), so a kill
does not count as growth and a passing spike does not either.

- ``soak_rss_growth_mb``, ``soak_fd_growth``, ``soak_thread_growth``: the largest growth of
  any role.
- ``soak_lag_p99_s``: the 99th percentile of the end-to-end lag (the larger of Redis's and
  OpenSearch's) over the per-second samples after the warm-up, outside every fault's
  window — from the fault's start until it recovered; a sink that does not answer
  outside those windows counts as infinitely late.
- ``soak_catchup_s``: the slowest recovery: from a fault's end (the server back, the
  process killed, PostgreSQL restarted) until the lag is under ``CAUGHT_UP_S`` and stays
  there for ``SETTLED_S`` (one sample under it, between late ones, is no recovery).
- ``soak_disk_growth_mb``: the log's bytes on disk once retention has had time to act
  (``retention_s`` plus a minute after the warm-up): the lowest size of the last third
  against the lowest of the first (the floor retention brings the log back to; the size
  between is a sawtooth, whole segments removed at once).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .probes import ProcessStats

CAUGHT_UP_S = 1.0
SETTLED_S = 10.0


def clock_lag(visible_us: int | None, committed_us: Sequence[int], now_us: int
              ) -> float | None:
    """Seconds the oldest committed clock value a sink does not show yet has waited (0
    when it shows the newest; None when it did not answer). ``committed_us`` ascending."""
    if visible_us is None:
        return None
    index = bisect.bisect_right(committed_us, visible_us)
    if index == len(committed_us):
        return 0.0
    return max(0.0, (now_us - committed_us[index]) / 1e6)


@dataclass(frozen=True, slots=True)
class LagSample:
    """The end-to-end lag to each sink at one moment (None: the sink did not answer)."""

    t: float
    redis_s: float | None
    opensearch_s: float | None

    @property
    def worst(self) -> float:
        if self.redis_s is None or self.opensearch_s is None:
            return math.inf
        return max(self.redis_s, self.opensearch_s)


@dataclass(frozen=True, slots=True)
class Sample:
    """Everything else, every few seconds."""

    t: float
    processes: dict[str, ProcessStats]
    capture_lag_s: float | None = None
    connector_lag: dict[str, int] = field(default_factory=dict)
    wal_retained_mb: float | None = None
    log_mb: float = 0.0


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault: what, when it struck and when it was over (the server back up)."""

    kind: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Figures:
    """What the soak prints (see the module docstring)."""

    rss_growth_mb: float
    fd_growth: int
    thread_growth: int
    lag_p99_s: float
    catchup_s: dict[str, float]
    disk_growth_mb: float

    @property
    def slowest_catchup_s(self) -> float:
        return max(self.catchup_s.values(), default=0.0)


@dataclass(frozen=True, slots=True)
class Thirds:
    """The judged part of a run: from ``warmup`` to ``end``, in thirds."""

    warmup: float
    end: float

    @property
    def third(self) -> float:
        return (self.end - self.warmup) / 3

    def first(self, t: float) -> bool:
        return self.warmup <= t < self.warmup + self.third

    def last(self, t: float) -> bool:
        return self.end - self.third <= t <= self.end


def growth(samples: Sequence[Sample], thirds: Thirds,
           measure: Callable[[ProcessStats], float]) -> float:
    """The largest growth of ``measure`` of any role between the first and last thirds."""
    largest = 0.0
    roles = {role for sample in samples for role in sample.processes}
    for role in sorted(roles):
        first = [measure(s.processes[role]) for s in samples
                 if role in s.processes and thirds.first(s.t)]
        last = [measure(s.processes[role]) for s in samples
                if role in s.processes and thirds.last(s.t)]
        if first and last:
            largest = max(largest, statistics.median(last) - statistics.median(first))
    return largest


def recovered_at(lags: Sequence[LagSample], after: float) -> float | None:
    """The first moment at or after ``after`` from which the lag stays under
    ``CAUGHT_UP_S`` for ``SETTLED_S`` (None if it never does)."""
    since: float | None = None
    for lag in lags:
        if lag.t < after:
            continue
        if lag.worst >= CAUGHT_UP_S:
            since = None
            continue
        since = lag.t if since is None else since
        if lag.t - since >= SETTLED_S:
            return since
    return None


def catchup(lags: Sequence[LagSample], faults: Sequence[Fault], end: float) -> dict[str, float]:
    """Seconds from each fault's end until caught up (until ``end`` if never)."""
    return {fault.kind: (recovered_at(lags, fault.end) or end) - fault.end for fault in faults}


def lag_p99(lags: Sequence[LagSample], faults: Sequence[Fault], warmup: float,
            end: float) -> float:
    """The 99th percentile of the lag outside the faults' windows (see the docstring)."""
    windows = [(fault.start, recovered_at(lags, fault.end) or end) for fault in faults]
    judged = sorted(lag.worst for lag in lags if lag.t >= warmup
                    and not any(start <= lag.t <= until for start, until in windows))
    if not judged:
        return math.inf
    return judged[min(len(judged) - 1, math.ceil(0.99 * len(judged)) - 1)]


def disk_growth(samples: Sequence[Sample], thirds: Thirds, retention_s: float) -> float:
    """The log's growth beyond retention (see the module docstring)."""
    settled = Thirds(thirds.warmup + retention_s + 60, thirds.end)
    if settled.third <= 0:
        return math.nan
    first = [s.log_mb for s in samples if settled.first(s.t)]
    last = [s.log_mb for s in samples if settled.last(s.t)]
    if not first or not last:
        return math.nan
    return min(last) - min(first)


def figures(samples: Sequence[Sample], lags: Sequence[LagSample], faults: Sequence[Fault],
            thirds: Thirds, retention_s: float) -> Figures:
    """Every figure of the module docstring."""
    return Figures(
        rss_growth_mb=growth(samples, thirds, lambda p: p.rss_mb),
        fd_growth=round(growth(samples, thirds, lambda p: p.fds)),
        thread_growth=round(growth(samples, thirds, lambda p: p.threads)),
        lag_p99_s=lag_p99(lags, faults, thirds.warmup, thirds.end),
        catchup_s=catchup(lags, faults, thirds.end),
        disk_growth_mb=disk_growth(samples, thirds, retention_s))
