"""A DROP the DDL capture records becomes a truncate event for captured tables only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import orjson
import psycopg

from cdc.capture.pgoutput import (
    Begin,
    Column,
    Commit,
    Insert,
    LogicalMessage,
    Relation,
    StreamAbort,
    StreamStart,
    StreamStop,
)
from cdc.capture.schema.ddl import DDL_PREFIX
from cdc.capture.schema.ddl_drops import DroppedTable, dropped_tables
from cdc.capture.schema.shapes import ShapeRegistry, versions_from_log
from cdc.capture.stream.spool import StreamSpool
from cdc.capture.stream.transactions import TransactionAssembler

INT4 = 23


class _Info:
    server_version = 150000


class _CatalogConnection:
    """Only built-in types and DEFAULT replica identity: the catalog is never queried."""

    info = _Info()


def _relation(oid: int, name: str, schema: str = "public") -> Relation:
    return Relation(oid, schema, name, "d", (Column(True, "id", INT4, -1),))


def _drop(*tables: tuple[str, str, int]) -> bytes:
    return orjson.dumps({"event": "sql_drop", "tag": "DROP TABLE", "command": "DROP …",
                         "dropped": [{"schema": s, "name": n, "oid": o} for s, n, o in tables]})


def _assembler(tmp_path: Path, shapes: ShapeRegistry | None = None) -> TransactionAssembler:
    shapes = shapes or ShapeRegistry(cast(psycopg.Connection[Any], _CatalogConnection()), "app")
    assembler = TransactionAssembler(shapes, StreamSpool(tmp_path / "spool"), "app",
                                     "app.messages", frozenset())
    assembler.topic_of_prefix[DDL_PREFIX] = "app._ddl"
    return assembler


def _events(assembler: TransactionAssembler) -> list[tuple[str, dict[str, Any]]]:
    return [(r.topic, orjson.loads(r.value)) for r in assembler.ready
            if not r.topic.endswith("._schemas")]


def test_only_sql_drop_messages_name_dropped_tables() -> None:
    assert dropped_tables(_drop(("public", "t", 7), ("s", "u", 9))) == [
        DroppedTable("public", "t", 7), DroppedTable("s", "u", 9)]
    ddl = orjson.dumps({"event": "ddl_command_end", "tag": "DROP TABLE", "objects": []})
    assert dropped_tables(ddl) == []
    assert dropped_tables(b"not json") == [] and dropped_tables(b"[1]") == []
    bad = orjson.dumps({"event": "sql_drop", "dropped": [{"schema": "public", "name": "t"},
                                                         "x", {"schema": "p", "name": "v",
                                                               "oid": 3}]})
    assert dropped_tables(bad) == [DroppedTable("p", "v", 3)]


def test_a_dropped_table_gets_a_truncate_after_its_rows(tmp_path: Path) -> None:
    assembler = _assembler(tmp_path)
    assembler.feed(Begin(0x200, 0, 5), 0x100)
    assembler.feed(_relation(7, "t"), 0x100)
    assembler.feed(Insert(7, ("1",)), 0x110)
    assembler.feed(Commit(0, 0x200, 0x210, 0), 0x200)
    assembler.feed(Begin(0x400, 0, 6), 0x300)
    assembler.feed(LogicalMessage(True, 0x300, DDL_PREFIX,
                                  _drop(("public", "t", 7), ("public", "never_seen", 8))), 0x300)
    assembler.feed(Commit(0, 0x400, 0x410, 0), 0x400)
    events = _events(assembler)
    assert [(topic, e["op"]) for topic, e in events] == [
        ("app.public.t", "c"), ("app._ddl", "m"), ("app.public.t", "t")]
    truncate = events[2][1]
    assert truncate["truncate"] == {"cascade": False, "restart_identity": False,
                                    "dropped": True}
    assert (truncate["source"]["schema"], truncate["source"]["table"]) == ("public", "t")
    assert truncate["source"]["seq"] == 1 and truncate["schema_version"] == 1


def test_a_drop_of_a_name_that_belongs_to_a_newer_relation_writes_nothing(
        tmp_path: Path) -> None:
    shapes = ShapeRegistry(cast(psycopg.Connection[Any], _CatalogConnection()), "app")
    old = shapes.learn(_relation(7, "t"))
    new = shapes.learn(_relation(8, "t"))  # created again: its own truncate came first
    assert old is not None and new is not None
    restarted = ShapeRegistry(cast(psycopg.Connection[Any], _CatalogConnection()), "app",
                              versions_from_log([(old.key, old.value), (new.key, new.value)]))
    for registry in (shapes, restarted):
        assert registry.dropped(7, "public", "t") is None
        shape = registry.dropped(8, "public", "t")
        assert shape is not None and shape.topic == "app.public.t"
        assert shape.schema_version == 2
    # renamed, then dropped under the new name: the truncate goes where its rows are
    shapes.learn(_relation(8, "t2"))
    shape = shapes.dropped(8, "public", "t2")
    assert shape is not None and shape.topic == "app.public.t2"


def test_a_streamed_drop_that_aborts_leaves_no_truncate(tmp_path: Path) -> None:
    assembler = _assembler(tmp_path)
    assembler.feed(Begin(0x200, 0, 5), 0x100)
    assembler.feed(_relation(7, "t"), 0x100)
    assembler.feed(Insert(7, ("1",)), 0x110)
    assembler.feed(Commit(0, 0x200, 0x210, 0), 0x200)
    assembler.feed(StreamStart(9, True), 0x300)
    assembler.feed(LogicalMessage(True, 0x300, DDL_PREFIX, _drop(("public", "t", 7)), xid=9),
                   0x300)
    assembler.feed(StreamStop(), 0x310)
    assembler.feed(StreamAbort(9, 9), 0x400)
    assembler.feed(Begin(0x600, 0, 10), 0x500)
    assembler.feed(Insert(7, ("2",)), 0x510)  # the table is still there, and still known
    assembler.feed(Commit(0, 0x600, 0x610, 0), 0x600)
    assert [e["op"] for _, e in _events(assembler)] == ["c", "c"]
