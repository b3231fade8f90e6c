"""A replica whose writes were fenced leaves the free slot to the one that fenced it."""

from __future__ import annotations

import threading
import time
from typing import Any

from cdc.capture.source.replicas import Standby
from cdc.capture.stream.replication import replica_name

Row = tuple[Any, ...] | None


class SlotView:
    """Answers ``slot_holder``'s query from a list of rows, the last one repeated."""

    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows
        self.asked = 0

    def execute(self, query: str, params: tuple[Any, ...] = ()) -> SlotView:
        self.asked += 1
        return self

    def fetchone(self) -> Row:
        return self.rows.pop(0) if len(self.rows) > 1 else self.rows[0]


FREE: Row = (None, "", False, 0.0)
OTHER: Row = (4242, "distributary other-host 17", True, 0.2)


def wait(standby: Standby, view: SlotView) -> tuple[float, Any]:
    started = time.monotonic()
    takeover = standby.wait(view, threading.Event())  # type: ignore[arg-type]
    return time.monotonic() - started, takeover


def test_a_free_slot_is_taken_at_once() -> None:
    seconds, takeover = wait(Standby("s", 0.5, poll_s=0.01), SlotView([FREE]))
    assert seconds < 0.4 and takeover is not None and not takeover.waited  # not 0.5 s


def test_a_fenced_replica_waits_for_the_fencer_then_takes_back_a_slot_nobody_took() -> None:
    standby = Standby("s", 0.5, poll_s=0.01)
    fenced_at = time.monotonic()  # before fenced(): its wait counts from its own call
    standby.fenced()
    _, takeover = wait(standby, SlotView([FREE]))
    assert time.monotonic() - fenced_at >= 0.5 and takeover.waited
    seconds, _ = wait(standby, SlotView([FREE]))
    assert seconds < 0.4, "the wait after being fenced is one wait, not every one"


def test_a_fenced_replica_stands_by_once_the_fencer_streams() -> None:
    standby = Standby("s", 5.0, poll_s=0.01)
    standby.fenced()
    view = SlotView([FREE, FREE, OTHER, OTHER, FREE])
    seconds, takeover = wait(standby, view)
    assert seconds < 2.5, "the fencer streamed, then left: no need to wait any longer"
    assert takeover.waited and view.asked == 5


def test_its_own_walsender_on_its_way_out_is_no_other_replica() -> None:
    standby = Standby("s", 0.3, poll_s=0.01)
    fenced_at = time.monotonic()
    standby.fenced()
    own: Row = (4243, replica_name(), True, 0.0)
    _, takeover = wait(standby, SlotView([own, own, FREE]))
    assert time.monotonic() - fenced_at >= 0.3 and takeover.waited
