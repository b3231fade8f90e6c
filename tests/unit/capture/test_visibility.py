"""Catalog reads wait until the decoded transaction is visible (the walsender can send a
commit before the backend has ended the transaction)."""

from __future__ import annotations

from typing import Any, cast

import orjson
import psycopg

from cdc.capture.pgoutput import Column, Relation
from cdc.capture.schema.shapes import ShapeRegistry
from cdc.capture.source.visibility import transaction_visible, wait_until_visible

XID = 1000
ADDRESS = (20000, "app", "address", "c", "C", 0, 0, 30000, ",", None, None)


class _Result:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows

    def __iter__(self) -> Any:
        return iter(self.rows)


class _Info:
    server_version = 150000


class _Catalog:
    """A catalog in which transaction ``XID`` created type ``app.address``; it ends (and
    its type shows) after ``running_for`` snapshots."""

    info = _Info()

    def __init__(self, running_for: int, *, dropped: bool = False) -> None:
        self.running_for = running_for
        self.dropped = dropped
        self.snapshots = 0

    def execute(self, query: str, params: tuple[Any, ...] = ()) -> _Result:
        ended = self.snapshots > self.running_for and not self.dropped
        if "pg_current_snapshot" in query:
            self.snapshots += 1
            ended = self.snapshots > self.running_for
            return _Result([("990:1005:" if ended else "990:1005:1000,1003",)])
        if "pg_index" in query:  # the primary key the transaction added
            return _Result([("id",)] if ended else [])
        if "pg_attribute" in query:
            return _Result([(30000, "street", 25)] if ended else [])
        (oids,) = params
        return _Result([ADDRESS] if ended and 20000 in oids else [])


def _learn(conn: _Catalog, xid: int | None) -> dict[str, Any]:
    shapes = ShapeRegistry(cast(psycopg.Connection[Any], conn), "app")
    relation = Relation(7, "public", "t", "d",
                        (Column(True, "id", 23, -1), Column(False, "home", 20000, -1)))
    record, _ = shapes.learn_relation(relation, xid=xid)
    assert record is not None
    value: dict[str, Any] = orjson.loads(record.value)
    return value


def test_a_transaction_is_visible_once_a_snapshot_has_it_ended() -> None:
    conn = _Catalog(running_for=1)  # 990:1005:1000,1003 once, then 990:1005:
    assert not transaction_visible(cast(psycopg.Connection[Any], conn), XID)
    assert transaction_visible(cast(psycopg.Connection[Any], conn), XID)
    assert not transaction_visible(cast(psycopg.Connection[Any], conn), 1005)  # not begun


def test_waits_until_the_transaction_is_visible() -> None:
    conn = _Catalog(running_for=3)
    slept: list[float] = []
    assert wait_until_visible(cast(psycopg.Connection[Any], conn), XID, sleep=slept.append)
    assert conn.snapshots == 4 and len(slept) == 3 and slept == sorted(slept)


def test_gives_up_after_its_budget() -> None:
    conn = _Catalog(running_for=1_000)
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    assert not wait_until_visible(cast(psycopg.Connection[Any], conn), XID, budget_s=1.0,
                                  sleep=sleep, clock=lambda: now[0])
    assert 1.0 <= now[0] < 1.2


def test_a_type_created_by_a_transaction_not_yet_ended_is_read_once_it_is() -> None:
    conn = _Catalog(running_for=2)
    column = _learn(conn, XID)["columns"][1]
    assert column["type"] == "app.address" and conn.snapshots == 3


def test_without_the_transaction_id_the_missing_type_stays_text() -> None:
    conn = _Catalog(running_for=2)
    column = _learn(conn, None)["columns"][1]
    assert column["type"] != "app.address" and conn.snapshots == 0


def test_a_type_dropped_since_is_not_waited_for() -> None:
    conn = _Catalog(running_for=0, dropped=True)
    column = _learn(conn, XID)["columns"][1]
    assert column["type"] != "app.address" and conn.snapshots == 1


def test_a_type_message_is_read_once_its_transaction_is_visible() -> None:
    conn = _Catalog(running_for=2)
    shapes = ShapeRegistry(cast(psycopg.Connection[Any], conn), "app")
    shapes.reload_type(20000, XID)
    info = shapes.catalog.get(20000)
    assert info is not None and info.attributes == (("street", 25),)
    shapes.reload_type(20000, XID)  # the same transaction: no second wait
    assert conn.snapshots == 3


def test_a_primary_key_added_by_a_transaction_not_yet_ended_is_read_once_it_is() -> None:
    conn = _Catalog(running_for=1)
    shapes = ShapeRegistry(cast(psycopg.Connection[Any], conn), "app")
    relation = Relation(7, "public", "t", "f",  # REPLICA IDENTITY FULL: every column "key"
                        (Column(True, "id", 23, -1), Column(True, "v", 25, -1)))
    record, _ = shapes.learn_relation(relation, xid=XID)
    assert record is not None
    columns = orjson.loads(record.value)["columns"]
    assert [(c["name"], c["key"]) for c in columns] == [("id", True), ("v", False)]
    assert conn.snapshots == 2
