"""``--repair`` waits until its snapshot has completed and the connectors caught up, and
says clearly when it did not within the timeout."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cdc.capture.snapshot.incremental_log import TableSnapshot
from cdc.errors import SourceError
from connectors.reconcile.catchup import CatchUpTimeoutError
from connectors.reconcile.repair import wait_repaired


class Steps:
    """States the capture records one poll after another, on a clock that moves per poll."""

    def __init__(self, states: list[TableSnapshot | None]) -> None:
        self._states: Iterator[TableSnapshot | None] = iter(states)
        self.last: TableSnapshot | None = None
        self.now = 0.0
        self.caught_up = 0

    def state(self) -> TableSnapshot | None:
        self.last = next(self._states, self.last)
        return self.last

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def catch_up(self) -> None:
        self.caught_up += 1

    def wait(self, timeout_s: float = 10.0) -> None:
        wait_repaired(self.state, "public.orders", self.catch_up, timeout_s,
                      clock=lambda: self.now, sleep=self.sleep)


def snapshot(state: str, rows: int = 0, reason: str | None = None) -> TableSnapshot:
    return TableSnapshot("public.orders", state, "0/1A2B3C", rows=rows, reason=reason)


def test_it_returns_once_completed_and_caught_up() -> None:
    steps = Steps([None, snapshot("requested"), snapshot("running", 3),
                   snapshot("completed", 7)])
    steps.wait()
    assert steps.caught_up == 1 and steps.now > 0


def test_a_snapshot_still_running_at_the_timeout_is_a_clear_error() -> None:
    steps = Steps([snapshot("running", 3)])
    with pytest.raises(CatchUpTimeoutError, match=r"the repair of public\.orders has not "
                       r"landed within 2s \(its incremental snapshot is running, 3 rows read\)"):
        steps.wait(2.0)
    assert steps.caught_up == 0
    with pytest.raises(CatchUpTimeoutError, match="not yet recorded by the capture"):
        Steps([None]).wait(1.0)


def test_a_cancelled_snapshot_is_no_repair() -> None:
    steps = Steps([snapshot("cancelled", reason="cancelled by cdc snapshot --cancel")])
    with pytest.raises(SourceError, match=r"was cancelled \(cancelled by cdc snapshot --cancel\)"):
        steps.wait()
    assert steps.caught_up == 0
