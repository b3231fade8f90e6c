"""One table of unchanged-TOAST cases, run through every implementation of the fill.

Each case is the events of one key (``id`` 1) in log order; the last one is the update
checked: ``row`` is the row it leaves once its ``unchanged`` columns are filled from what
came before it, ``missing`` the columns nothing held (a sink keeps its stored value,
Spark's materialization gives null). ``derived.fill_unchanged``, a sink's batch
(``connectors.changes``, with and without coalescing) and ``spark_pipelines.materialize``
run them all, except that Spark skips a case with a ``spark_differs`` reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

COLUMNS = ("id", "title", "body", "note")


@dataclass(frozen=True, slots=True)
class ToastEvent:
    """One event of the key: ``op`` ``c``/``u``/``r``/``d``."""

    op: str
    after: dict[str, Any] | None = None
    unchanged: tuple[str, ...] = ()
    before: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ToastCase:
    """What the last of ``events`` leaves (see the module docstring)."""

    name: str
    events: tuple[ToastEvent, ...]
    row: dict[str, Any]
    missing: frozenset[str] = field(default_factory=frozenset)
    spark_differs: str | None = None


def insert(**row: Any) -> ToastEvent:
    return ToastEvent("c", {"id": 1, **row})


def update(*unchanged: str, before: dict[str, Any] | None = None, **row: Any) -> ToastEvent:
    return ToastEvent("u", {"id": 1, **row}, unchanged, before)


CASES = (
    ToastCase("nothing unchanged", (insert(title="a", body="x"), update(title="b", body="y")),
              {"id": 1, "title": "b", "body": "y"}),
    ToastCase("from the earlier event", (insert(title="a", body="x"), update("body", title="b")),
              {"id": 1, "title": "b", "body": "x"}),
    ToastCase("from the newest event that sent it",
              (insert(body="x"), update(body="y"), update("body", title="t")),
              {"id": 1, "title": "t", "body": "y"}),
    ToastCase("through events that left it out too",
              (insert(body="x"), update("body", title="t1"), update("body", title="t2")),
              {"id": 1, "title": "t2", "body": "x"}),
    ToastCase("a null sent earlier is the value", (insert(body=None), update("body", title="t")),
              {"id": 1, "title": "t", "body": None}),
    ToastCase("an earlier event before 'before'",
              (insert(body="x"), update("body", title="t", before={"id": 1, "body": "old"})),
              {"id": 1, "title": "t", "body": "x"}),
    ToastCase("from before", (update("body", "note", title="t",
                                     before={"id": 1, "note": "n", "body": "b"}),),
              {"id": 1, "title": "t", "note": "n", "body": "b"},
              spark_differs="Spark reads no 'before'"),
    ToastCase("nothing holds it", (update("body", "note", title="t",
                                          before={"id": 1, "note": "n"}),),
              {"id": 1, "title": "t", "note": "n"}, frozenset({"body"}),
              spark_differs="Spark reads no 'before'"),
    ToastCase("nothing at all", (update("body", title="t"),), {"id": 1, "title": "t"},
              frozenset({"body"})),
    ToastCase("a value in 'after' for a listed column is not its value",
              (insert(body="x"), update("body", title="t", body=None)),
              {"id": 1, "title": "t", "body": "x"}),
    ToastCase("nor when nothing else holds it", (update("body", title="t", body="junk"),),
              {"id": 1, "title": "t"}, frozenset({"body"})),
    ToastCase("a delete forgets the row",
              (insert(body="x"), ToastEvent("d"), ToastEvent("c", {"id": 1}, ("body",))),
              {"id": 1}, frozenset({"body"}),
              spark_differs="Spark looks past deletes (after one, an insert resends every "
                            "column, so only made-up events tell)"),
)
