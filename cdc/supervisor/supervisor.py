"""``Supervisor``: keeps the children of ``cdc run`` running until it is told to stop.

A child that exits on its own is started again after a backoff that doubles with each
exit in a row (``Backoff``), and resets once the child stayed up ``reset_after_s``. A
child that exits with status 2 (usage, configuration, missing extra) or 3 (an error a
restart cannot fix: a lost slot without ``--recreate-lost-slot``, a corrupt log…) stops
the whole pipeline: ``run`` returns that ``ChildExit``. Stopping sends SIGTERM to every
child, waits ``stop_timeout_s`` for their clean exits (the capture flushes and
acknowledges, each connector commits), then SIGKILLs what is left.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from cdc.backoff import ExponentialBackoff

from .exits import FATAL_STATUSES
from .process import ChildSpec

log = logging.getLogger(__name__)

_TICK_S = 0.1


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delay before the ``n``-th restart in a row: ``initial_s * 2**(n-1)``, at most
    ``cap_s``; a child that stayed up ``reset_after_s`` starts the count again."""

    initial_s: float = 1.0
    cap_s: float = 30.0
    reset_after_s: float = 60.0

    def delay(self, in_a_row: int) -> float:
        """Seconds to wait before the ``in_a_row``-th restart in a row."""
        return ExponentialBackoff(self.initial_s, self.cap_s).delay(in_a_row)


@dataclass(frozen=True, slots=True)
class ChildExit:
    """A child that exited: its name, status and last error line."""

    name: str
    status: int
    error: str | None

    def describe(self) -> str:
        how = (f"killed by signal {-self.status}" if self.status < 0
               else f"exited with status {self.status}")
        return how + ("" if self.error is None else f": {self.error}")


@dataclass(frozen=True, slots=True)
class ChildState:
    """What the observability endpoint shows of a child."""

    name: str
    up: bool
    restarts: int
    port: int | None = None  # its metrics endpoint on 127.0.0.1
    last_exit: ChildExit | None = None
    restart_in_s: float | None = None
    serves_endpoint: bool = True  # False: healthy while up (no endpoint to ask)


class RunningChild(Protocol):
    """What the supervisor needs of a started child (``ChildProcess``, or a test's fake)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def port(self) -> int | None: ...

    def last_error(self) -> str | None: ...

    def signal(self, signum: int) -> None: ...

    def wait(self, timeout_s: float) -> int | None: ...

    def kill(self) -> int: ...


class _Slot:
    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec
        self.process: RunningChild | None = None
        self.started_at = 0.0
        self.restarts = 0
        self.in_a_row = 0
        self.last_exit: ChildExit | None = None
        self.restart_at: float | None = None


class Supervisor:
    """Runs ``specs`` as children made by ``launch``; see the module docstring."""

    def __init__(self, specs: Sequence[ChildSpec], launch: Callable[[ChildSpec], RunningChild],
                 *, backoff: Backoff = Backoff(), stop_timeout_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._slots = [_Slot(spec) for spec in specs]
        self._launch = launch
        self._backoff = backoff
        self._stop_timeout_s = stop_timeout_s
        self._clock = clock
        self._lock = threading.Lock()

    def states(self) -> list[ChildState]:
        """Every child's state now (safe from any thread)."""
        now = self._clock()
        with self._lock:
            return [ChildState(
                slot.spec.name, slot.process is not None, slot.restarts,
                None if slot.process is None else slot.process.port(), slot.last_exit,
                None if slot.restart_at is None else max(0.0, slot.restart_at - now),
                slot.spec.serves_endpoint)
                for slot in self._slots]

    def run(self, stop: threading.Event) -> ChildExit | None:
        """Supervise until ``stop`` is set (None) or a child exits fatally (returned)."""
        try:
            for slot in self._slots:
                self._start(slot)
            while not stop.wait(_TICK_S):
                for slot in self._slots:
                    fatal = self._check(slot)
                    if fatal is not None:
                        return fatal
            return None
        finally:
            self._stop_all()

    def _start(self, slot: _Slot) -> None:
        process = self._launch(slot.spec)
        with self._lock:
            slot.process, slot.started_at, slot.restart_at = process, self._clock(), None
        log.info("started %s (pid %d)", slot.spec.name, process.pid,
                 extra={"child": slot.spec.name, "pid": process.pid})

    def _check(self, slot: _Slot) -> ChildExit | None:
        now = self._clock()
        if slot.process is None:
            if slot.restart_at is not None and now >= slot.restart_at:
                with self._lock:
                    slot.restarts += 1
                self._start(slot)
            return None
        status = slot.process.poll()
        if status is None:
            return None
        slot.process.wait(1.0)  # its last lines
        exited = ChildExit(slot.spec.name, status, slot.process.last_error())
        if status in FATAL_STATUSES:
            with self._lock:
                slot.process, slot.last_exit = None, exited
            log.error("%s exited with status %d, which a restart cannot fix: stopping the "
                      "pipeline", slot.spec.name, status, extra={"child": slot.spec.name})
            return exited
        slot.in_a_row = 1 if now - slot.started_at >= self._backoff.reset_after_s \
            else slot.in_a_row + 1
        delay = self._backoff.delay(slot.in_a_row)
        with self._lock:
            slot.process, slot.last_exit, slot.restart_at = None, exited, now + delay
        log.warning("%s %s; restarting it in %.1fs", slot.spec.name, exited.describe(), delay,
                    extra={"child": slot.spec.name, "status": status, "delay_s": delay})
        return None

    def _stop_all(self) -> None:
        running = [slot for slot in self._slots if slot.process is not None]
        for slot in running:
            assert slot.process is not None
            slot.process.signal(signal.SIGTERM)
        deadline = self._clock() + self._stop_timeout_s
        for slot in running:
            assert slot.process is not None
            status = slot.process.wait(max(0.0, deadline - self._clock()))
            if status is None:
                log.warning("%s did not stop within %.0fs; killing it", slot.spec.name,
                            self._stop_timeout_s, extra={"child": slot.spec.name})
                status = slot.process.kill()
            elif status != 0:
                log.warning("%s stopped with status %d", slot.spec.name, status,
                            extra={"child": slot.spec.name})
            with self._lock:
                slot.process = None
