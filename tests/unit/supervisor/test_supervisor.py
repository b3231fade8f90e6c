"""``Supervisor`` with hand-written fake children: restarts, backoff, fatal exits, stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import click

from cdc.errors import DistributaryError, TerminalError
from cdc.supervisor import Backoff, ChildExit, ChildSpec, Supervisor
from cdc.supervisor.exits import EXIT_TERMINAL, is_terminal
from cdc.supervisor.supervisor import RunningChild


class FakeChild:
    """Exits with ``status`` at once, or runs until signalled (``status`` None)."""

    def __init__(self, pid: int, status: int | None, *, stubborn: bool = False) -> None:
        self.pid = pid
        self._status = status
        self._stubborn = stubborn
        self.signals: list[int] = []

    def poll(self) -> int | None:
        return self._status

    def port(self) -> int | None:
        return None

    def last_error(self) -> str | None:
        return None if self._status is None else f"failure {self._status}"

    def signal(self, signum: int) -> None:
        self.signals.append(signum)
        if signum == signal.SIGKILL or not self._stubborn:
            self._status = -signum if self._status is None else self._status

    def wait(self, timeout_s: float) -> int | None:
        if self._status is None:
            time.sleep(timeout_s)
        return self._status

    def kill(self) -> int:
        self.signal(signal.SIGKILL)
        assert self._status is not None
        return self._status


class Launcher:
    """Hands out the scripted statuses of each child, in order; then children that run."""

    def __init__(self, script: dict[str, list[int | None]], stubborn: bool = False) -> None:
        self.script = script
        self.stubborn = stubborn
        self.started: list[FakeChild] = []
        self.names: list[str] = []

    def __call__(self, spec: ChildSpec) -> RunningChild:
        statuses = self.script.setdefault(spec.name, [])
        child = FakeChild(len(self.started) + 100, statuses.pop(0) if statuses else None,
                          stubborn=self.stubborn)
        self.started.append(child)
        self.names.append(spec.name)
        return child


SPECS = [ChildSpec("capture", ("capture",)), ChildSpec("connector cache", ("connect",))]
FAST = Backoff(initial_s=0.05, cap_s=0.2, reset_after_s=60)


def supervise(supervisor: Supervisor, until: threading.Event | None = None
              ) -> tuple[threading.Event, threading.Thread, list[ChildExit | None]]:
    stop = until or threading.Event()
    result: list[ChildExit | None] = []
    thread = threading.Thread(target=lambda: result.append(supervisor.run(stop)))
    thread.start()
    return stop, thread, result


def wait_for(condition: object, timeout_s: float = 5.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_backoff_doubles_up_to_its_cap() -> None:
    backoff = Backoff(initial_s=1, cap_s=10)
    assert [backoff.delay(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]


def test_a_child_that_exits_is_restarted_counted_and_stopped_at_the_end() -> None:
    launcher = Launcher({"capture": [1, 1]})
    supervisor = Supervisor(SPECS, launcher, backoff=FAST, stop_timeout_s=1)
    stop, thread, result = supervise(supervisor)
    wait_for(lambda: launcher.names.count("capture") == 3)
    wait_for(lambda: supervisor.states()[0].up)
    capture, connector = supervisor.states()
    assert (capture.restarts, connector.restarts) == (2, 0)
    assert capture.last_exit == ChildExit("capture", 1, "failure 1")
    stop.set()
    thread.join(5)
    assert result == [None]
    running = [launcher.started[-1], launcher.started[1]]
    assert all(child.signals == [signal.SIGTERM] for child in running)


def test_a_down_child_says_when_it_restarts() -> None:
    launcher = Launcher({"connector cache": [1]})
    supervisor = Supervisor(SPECS, launcher, backoff=Backoff(initial_s=30), stop_timeout_s=1)
    stop, thread, _ = supervise(supervisor)
    wait_for(lambda: supervisor.states()[1].last_exit is not None)
    state = supervisor.states()[1]
    assert not state.up and state.restart_in_s is not None and 25 < state.restart_in_s <= 30
    stop.set()
    thread.join(5)


def test_a_fatal_exit_stops_every_child_and_is_returned() -> None:
    launcher = Launcher({"capture": [EXIT_TERMINAL]})
    supervisor = Supervisor(SPECS, launcher, backoff=FAST, stop_timeout_s=1)
    _, thread, result = supervise(supervisor)
    thread.join(5)
    assert result == [ChildExit("capture", EXIT_TERMINAL, "failure 3")]
    assert launcher.started[1].signals == [signal.SIGTERM]
    assert launcher.names == ["capture", "connector cache"]  # nothing restarted


def test_a_child_that_ignores_sigterm_is_killed_after_the_timeout() -> None:
    launcher = Launcher({}, stubborn=True)
    supervisor = Supervisor(SPECS[:1], launcher, stop_timeout_s=0.1)
    stop, thread, _ = supervise(supervisor)
    wait_for(lambda: launcher.started)
    stop.set()
    thread.join(5)
    assert launcher.started[0].signals == [signal.SIGTERM, signal.SIGKILL]


def test_terminal_errors_are_found_behind_the_command_error() -> None:
    def failing(cause: DistributaryError) -> click.ClickException:
        try:
            try:
                raise cause
            except DistributaryError as exc:
                raise click.ClickException(str(exc)) from None
        except click.ClickException as exc:
            return exc

    assert is_terminal(failing(TerminalError("lost slot")))
    assert not is_terminal(failing(DistributaryError("connection refused")))


# a child started after its supervisor was killed: its parent is already init
ORPHAN = """
import os, sys, time
from cdc.supervisor.child import stop_when_orphaned, supervisor_pid
assert supervisor_pid() == int(os.environ["DISTRIBUTARY_SUPERVISOR_PID"]) != os.getppid()
stop_when_orphaned(supervisor_pid())
time.sleep(30)
sys.exit(5)
"""


def test_a_child_whose_supervisor_died_before_it_started_stops_at_once() -> None:
    started = time.monotonic()
    # the supervisor named in the environment is gone (pid 1 is never this test's pid)
    done = subprocess.run([sys.executable, "-c", ORPHAN], timeout=20, capture_output=True,
                          env={**os.environ, "DISTRIBUTARY_SUPERVISOR_PID": "1"})
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert time.monotonic() - started < 10
