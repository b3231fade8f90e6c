"""The shared unchanged-TOAST cases through a sink's batch: ``ChangeReader`` alone, and
after coalescing (``connectors.runtime.coalesce``), as a worker reads a batch."""

from __future__ import annotations

import pytest

from connectors.changes import ChangeReader, Upsert
from connectors.contract import SinkEvent
from connectors.runtime import coalesce
from tests.unit.derived.toast_cases import CASES, ToastCase, insert, update

from .sink_events import TableEvents


def batch(case: ToastCase) -> list[SinkEvent]:
    table = TableEvents(table="docs")
    return [table.delete({"id": 1}, 10 + index) if event.after is None
            else table.upsert(event.after, 10 + index, op=event.op, unchanged=event.unchanged,
                              before=event.before)
            for index, event in enumerate(case.events)]


@pytest.mark.parametrize("coalesced", [False, True], ids=["as-read", "coalesced"])
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_shared_cases(case: ToastCase, coalesced: bool) -> None:
    events = batch(case)
    if coalesced:
        events = coalesce(events)
        assert len(events) == 1
    changes, rejected = ChangeReader([]).read(events)
    assert rejected == []
    last = changes[-1]
    assert isinstance(last, Upsert)
    assert (last.row, last.missing) == (case.row, case.missing)


def test_coalescing_fills_from_dropped_events_only() -> None:
    """``before`` is the reader's: a coalesced event still lists what only ``before``
    holds, so a webhook gets the event as the capture wrote it but for filled columns."""
    case = ToastCase("", (insert(title="a", note="n"),
                          update("body", "note", title="t", before={"id": 1, "body": "b"})),
                     {"id": 1, "title": "t", "note": "n", "body": "b"})
    (kept,) = coalesce(batch(case))
    assert kept.event["after"] == {"id": 1, "title": "t", "note": "n"}
    assert kept.event["unchanged"] == ["body"]
    (change,), _ = ChangeReader([]).read([kept])
    assert isinstance(change, Upsert) and change.row == case.row and not change.missing
