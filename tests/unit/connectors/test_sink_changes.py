"""From events to changes: routing through views, and completing unchanged TOAST columns."""

from __future__ import annotations

from connectors.changes import ChangeReader, Delete, Truncate, Upsert
from derived import ViewDefinition

from .sink_events import TableEvents

ORDERS = TableEvents()


def views(*targets: str) -> list[ViewDefinition]:
    return [ViewDefinition(source="public.orders", target=target) for target in targets]


def test_each_event_becomes_a_change_per_view() -> None:
    reader = ChangeReader(views("a", "b"))
    changes, rejected = reader.read([ORDERS.upsert({"id": 1}, 10), ORDERS.delete({"id": 1}, 11),
                                     ORDERS.truncate(12)])
    assert rejected == []
    assert [(type(c).__name__, c.view.target if c.view else None) for c in changes] == [
        ("Upsert", "a"), ("Upsert", "b"), ("Delete", "a"), ("Delete", "b"),
        ("Truncate", "a"), ("Truncate", "b")]


def test_tables_without_a_view_pass_as_they_are() -> None:
    other = TableEvents(table="customers")
    changes, _ = ChangeReader(views("a")).read([other.upsert({"id": 1}, 10)])
    assert isinstance(changes[0], Upsert)
    assert changes[0].view is None
    assert changes[0].names.table == "customers"
    assert changes[0].names.prefix == "app"


def test_messages_are_skipped_and_nonsense_rejected() -> None:
    bad_op = ORDERS.event("x", {"id": 1}, 10)
    no_after = ORDERS.event("u", {"id": 1}, 11)
    no_key = ORDERS.event("c", {}, 12, after={"id": 1})
    message = ORDERS.event("m", {"prefix": "p"}, 13)
    changes, rejected = ChangeReader([]).read([bad_op, no_after, no_key, message])
    assert changes == []
    assert [r.reason for r in rejected] == ["unknown op 'x'", "op 'u' without an 'after' row",
                                            "op 'c' without a key"]


def test_unchanged_columns_come_from_the_batch_then_before() -> None:
    batch = [ORDERS.upsert({"id": 1, "body": "v1", "note": "n1"}, 10, op="c"),
             ORDERS.upsert({"id": 1, "title": "t"}, 11, unchanged=["body", "note"],
                           before={"id": 1, "note": "from before", "body": "older"}),
             ORDERS.upsert({"id": 2, "title": "t"}, 12, unchanged=["body", "note"],
                           before={"id": 2, "note": "from before"})]
    changes, _ = ChangeReader([]).read(batch)
    second, third = changes[1], changes[2]
    assert isinstance(second, Upsert) and isinstance(third, Upsert)
    assert second.row == {"id": 1, "title": "t", "body": "v1", "note": "n1"}
    assert second.missing == frozenset()
    assert third.row == {"id": 2, "title": "t", "note": "from before"}
    assert third.missing == {"body"}


def test_a_delete_forgets_the_row_of_the_batch() -> None:
    batch = [ORDERS.upsert({"id": 1, "body": "v1"}, 10), ORDERS.delete({"id": 1}, 11),
             ORDERS.upsert({"id": 1}, 12, op="c", unchanged=["body"])]
    changes, _ = ChangeReader([]).read(batch)
    assert isinstance(changes[1], Delete)
    last = changes[2]
    assert isinstance(last, Upsert) and last.missing == {"body"}


def test_truncates_keep_their_table() -> None:
    changes, _ = ChangeReader([], "fallback").read([ORDERS.truncate(5)])
    assert isinstance(changes[0], Truncate)
    assert changes[0].names.topic == "app.public.orders"
