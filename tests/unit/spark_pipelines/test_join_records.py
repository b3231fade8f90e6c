"""A joined view's records in a rebuild task, without Spark: built by ``build_record``,
versioned by the newest row they read, deletes where a root has no record."""

from __future__ import annotations

from typing import Any

import orjson

from connectors.contract import version_of
from derived import JoinedView
from spark_pipelines.columns import table_columns
from spark_pipelines.join_gather import ROOT
from spark_pipelines.join_records import joined_events
from spark_pipelines.state import TableHistory

VIEW = JoinedView.model_validate({
    "source": "public.orders", "target": "orders", "filter": "status != 'void'",
    "lookups": [{"name": "customer", "source": "public.customers",
                 "on": {"customer_id": "id"}}],
    "nested": [{"name": "items", "source": "public.items", "on": {"id": "order_id"},
                "order_by": ["line"], "exclude": ["order_id"]}]})


def history(table: str, *columns: str) -> TableHistory:
    return TableHistory(table_columns({"schema": "public", "table": table, "schema_version": 1,
                                       "columns": [{"name": c, "type": "pg_catalog.int8"
                                                    if c != "status" else "pg_catalog.text",
                                                    "key": i == 0}
                                                   for i, c in enumerate(columns)]}))


TABLES = (("public.orders", history("orders", "id", "customer_id", "status"), "p.orders"),
          ("public.customers", history("customers", "id", "name"), "p.customers"),
          ("public.items", history("items", "line", "order_id"), "p.items"))


def line(table: int, lsn: int, op: str = "c", **row: Any) -> str:
    key = next(iter(row.items()))
    return orjson.dumps({"_t": table, "_key": orjson.dumps(dict([key])).decode(), "_lsn": lsn,
                         "_seq": 0, "_op": op, "_schema_version": 1,
                         **{k: str(v) for k, v in row.items()}}).decode()


LINES = [
    line(ROOT, 10, id=1, customer_id=7, status="new"),
    line(ROOT, 11, id=2, customer_id=8, status="void"),
    line(ROOT, 12, "d", id=3),
    line(1, 30, id=7, name=5),
    line(2, 20, line=2, order_id=1), line(2, 25, line=1, order_id=1),
    line(2, 20, line=2, order_id=1),  # the same row joined at another level
]


def test_records_are_built_and_versioned_by_the_newest_row_read() -> None:
    events = list(joined_events(VIEW, TABLES, LINES, deletes=False))
    assert [e.event["after"] for e in events] == [{
        "id": 1, "customer_id": 7, "status": "new", "customer": {"id": 7, "name": 5},
        "items": [{"line": 1}, {"line": 2}]}]
    [event] = events
    assert event.version == version_of(30, 0) and event.event["key"] == {"id": 1}
    assert event.message.key == b'{"id":1}' and event.message.position == (30, 0)
    assert orjson.loads(event.message.value)["after"] == event.event["after"]


def test_roots_without_a_record_are_deleted_when_asked() -> None:
    events = {e.event["key"]["id"]: e for e in joined_events(VIEW, TABLES, LINES,
                                                              deletes=True)}
    assert events[1].event["op"] == "c"
    assert events[2].event["op"] == "d" and events[2].version == version_of(11, 0)
    assert events[3].event["op"] == "d" and events[3].message.tombstone
