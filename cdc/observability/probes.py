"""Readings of the running parts: the capture's counters and positions, the connectors'
state and lag. Probes only read what the parts publish; they never slow them down."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from cdc.capture.runner import CaptureStats

from .connector_metrics import RuntimeMetrics
from .health import PartHealth
from .wal import ServerWal, WalPositions

PG_EPOCH_UNIX_S = 946_684_800  # 2000-01-01T00:00:00Z, pgoutput's clock origin


@dataclass(frozen=True, slots=True)
class CaptureReading:
    """The capture at one moment."""

    streaming: bool
    events: int
    events_by_topic: dict[str, int]
    acked_lsn: int
    server_lsn: int | None
    lag_bytes: int | None
    lag_seconds: float | None
    retained_bytes: int | None
    decode_fallbacks: dict[tuple[str, str], int] = field(default_factory=dict)  # (table, column)
    takeover_seconds: tuple[float, ...] = ()  # each takeover, from the last holder's life


def lag_bytes(current_lsn: int | None, acked_lsn: int, confirmed_lsn: int | None) -> int | None:
    """WAL written on the server past what was acknowledged (by us, or before us: the slot's
    confirmed position); None when the server position is unknown."""
    if current_lsn is None:
        return None
    flushed = max(acked_lsn, confirmed_lsn or 0)
    if flushed == 0:
        return None
    return max(0, current_lsn - flushed)


def lag_seconds(stats: CaptureStats, now_unix_s: float) -> float | None:
    """Seconds since the commit of the last transaction appended, while the capture has
    received WAL it has not acknowledged; 0 once it acknowledged all it was sent; None
    while nothing was appended yet."""
    if stats.acked_lsn and stats.acked_lsn >= max(stats.server_lsn, stats.received_lsn):
        return 0.0
    if not stats.commit_ts_us:
        return None
    return max(0.0, now_unix_s - (PG_EPOCH_UNIX_S + stats.commit_ts_us / 1e6))


class CaptureProbe:
    """Reads a ``Capture``'s stats; ``refresh`` asks the server for its WAL position."""

    def __init__(self, stats: CaptureStats, wal: ServerWal | None,
                 alive: Callable[[], bool]) -> None:
        self._stats = stats
        self._wal = wal
        self._alive = alive
        self._positions: WalPositions | None = None

    def refresh(self) -> None:
        """Read the server's WAL position and the slot (call at most every few seconds)."""
        if self._wal is not None:
            self._positions = self._wal.read()

    def close(self) -> None:
        """Close the probe's own database connection."""
        if self._wal is not None:
            self._wal.close()

    def reading(self, now_unix_s: float) -> CaptureReading:
        """What the capture reports now (no I/O)."""
        stats, positions = self._stats, self._positions
        current = None if positions is None else positions.current_lsn
        by_topic = dict(stats.events_by_topic)  # one C-level copy: the capture appends on
        return CaptureReading(
            streaming=stats.streaming, events=sum(by_topic.values()),
            events_by_topic=by_topic, acked_lsn=stats.acked_lsn,
            server_lsn=current,
            lag_bytes=lag_bytes(current, stats.acked_lsn,
                                None if positions is None else positions.confirmed_lsn),
            lag_seconds=lag_seconds(stats, now_unix_s),
            retained_bytes=None if positions is None else positions.retained_bytes,
            decode_fallbacks=stats.decode_fallbacks.snapshot(),
            takeover_seconds=tuple(stats.takeover_seconds))

    def health(self) -> PartHealth:
        """``streaming`` when ready; otherwise why not."""
        if not self._alive():
            return PartHealth("capture", "stopped", "the capture stopped (see the log)")
        if self._stats.standby:  # ready: standing by is what a replica should do
            return PartHealth("capture", "standby")
        waiting = self._stats.log_problem()
        if waiting is not None:
            return PartHealth("capture", "waiting for the log",
                              f"appending to the log, retrying: {waiting}")
        if not self._stats.streaming:
            failure = self._stats.last_failure
            if failure is not None:
                return PartHealth("capture", "reconnecting",
                                  f"not streaming: retrying after {failure}")
            return PartHealth("capture", "starting", "not streaming yet (connecting, taking "
                              "the initial snapshot, or reconnecting)")
        return PartHealth("capture", "streaming")


class RunnerState(Protocol):
    """What the probe reads of a ``ConnectorRunner``."""

    @property
    def group(self) -> str: ...

    @property
    def stopping(self) -> bool: ...

    @property
    def failures(self) -> list[BaseException]: ...

    @property
    def problem(self) -> str | None: ...


class ConnectorsProbe:
    """The connectors' state (once ``attach``-ed) and their lag from the metrics registry."""

    def __init__(self, metrics: RuntimeMetrics, names: Sequence[str]) -> None:
        self._metrics = metrics
        self._names = list(names)
        self._runners: list[RunnerState] = []
        self._lock = threading.Lock()

    def attach(self, runners: Sequence[RunnerState]) -> None:
        """Watch these started runners (``run_connectors`` calls this)."""
        with self._lock:
            self._runners = list(runners)

    def lag_by_connector(self) -> dict[str, int]:
        """Events behind, summed over each connector's partitions (0 before any reading)."""
        lag = dict.fromkeys(self._names, 0)
        for family in self._metrics.lag.collect():
            for sample in family.samples:
                name = sample.labels.get("connector", "")
                lag[name] = lag.get(name, 0) + int(sample.value)
        return lag

    def health(self) -> list[PartHealth]:
        """One part per connector: ``running``, or why not."""
        with self._lock:
            runners = {runner.group: runner for runner in self._runners}
        parts = []
        for name in self._names:
            runner = runners.get(name)
            part = f"connector {name}"
            if runner is None:
                parts.append(PartHealth(part, "starting", "not started yet"))
            elif runner.failures:
                parts.append(PartHealth(part, "failed", "failed (see the log)"))
            elif runner.stopping:
                parts.append(PartHealth(part, "stopping", "stopping"))
            elif (problem := runner.problem) is not None:
                parts.append(PartHealth(part, "retrying", problem))
            else:
                parts.append(PartHealth(part, "running"))
        return parts
