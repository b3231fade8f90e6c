"""One value, one name or one re-created table never stops the capture (pure logic)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import orjson
import psycopg
import pytest

from cdc.capture.codecs import TypeCatalog, TypeInfo, composite_codec, decode_int
from cdc.capture.events import TableShape, read_event, update_events
from cdc.capture.fallbacks import FALLBACKS, DecodeFallbacks
from cdc.capture.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Column,
    Commit,
    Insert,
    LogicalMessage,
    Relation,
)
from cdc.capture.schema.ddl import DDL_PREFIX
from cdc.capture.schema.event_schema import EVENT_JSON_SCHEMA
from cdc.capture.schema.shapes import ShapeRegistry
from cdc.capture.stream.spool import StreamSpool
from cdc.capture.stream.transactions import RowsRewritten, TransactionAssembler
from cdc.config.topic_names import TopicNamer
from cdc.errors import ConfigError

INT4, FLOAT8 = 23, 701


class _Info:
    server_version = 150000


class _CatalogConnection:
    """Only built-in types and DEFAULT replica identity: the catalog is never queried."""

    info = _Info()


def _assembler(tmp_path: Path, namer: TopicNamer | None = None) -> TransactionAssembler:
    conn = cast(psycopg.Connection[Any], _CatalogConnection())
    shapes = ShapeRegistry(conn, namer or TopicNamer("app"))
    return TransactionAssembler(shapes, StreamSpool(tmp_path / "spool"), "db", "app.messages",
                                frozenset())


def _relation(oid: int, schema: str = "public", name: str = "t") -> Relation:
    return Relation(oid, schema, name, "d",
                    (Column(True, "id", INT4, -1), Column(False, "f", FLOAT8, -1)))


def _transaction(assembler: TransactionAssembler, xid: int, *messages: Any) -> None:
    assembler.feed(Begin(0x100 * xid, 0, xid), 0x100 * xid - 8)
    for message in messages:
        assembler.feed(message, 0x100 * xid - 4)
    assembler.feed(Commit(0, 0x100 * xid, 0x100 * xid + 8, 0), 0x100 * xid)


def _events(assembler: TransactionAssembler) -> list[dict[str, Any]]:
    return [orjson.loads(r.value) for r in assembler.ready if not r.topic.endswith("_schemas")]


def test_a_value_its_codec_cannot_read_is_kept_as_text_and_marked(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # FALLBACKS warns once a minute per column for the whole process: a table of its own
    # (this test may run again, by --count) has had no warning yet
    table = f"t_{uuid.uuid4().hex[:8]}"
    assembler = _assembler(tmp_path)
    with caplog.at_level(logging.WARNING):
        _transaction(assembler, 1, _relation(7, name=table), Insert(7, ("1", "not a float")),
                     Insert(7, ("2", "2.5")))
    first, second = _events(assembler)
    assert first["after"] == {"id": 1, "f": "not a float"}
    assert first["unparsed"] == ["f"]
    assert second["after"] == {"id": 2, "f": 2.5} and "unparsed" not in second
    assert FALLBACKS.snapshot()[(f"public.{table}", "f")] == 1
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert f"public.{table} column f" in warning and "not a float" not in warning


@pytest.mark.parametrize(("warn_every_s", "warnings"), [(3600.0, 1), (0.0, 3)])
def test_fallback_warnings_are_rate_limited_per_column(
        caplog: pytest.LogCaptureFixture, warn_every_s: float, warnings: int) -> None:
    counts = DecodeFallbacks(warn_every_s=warn_every_s)
    with caplog.at_level(logging.WARNING):
        for lsn in (16, 32, 48):
            counts.record("public.t", "f", lsn, ValueError("x"))
    assert len(caplog.records) == warnings
    assert counts.snapshot() == {("public.t", "f"): 3}


def test_a_key_value_kept_as_text_and_a_snapshot_row_too() -> None:
    conn = cast(psycopg.Connection[Any], _CatalogConnection())
    shapes = ShapeRegistry(conn, "app")
    shapes.learn(_relation(7))
    event = read_event(shapes.get(7), ["x1", "1.5"], 16)
    body = orjson.loads(event.body)
    assert body["key"] == {"id": "x1"} and body["after"] == {"id": "x1", "f": 1.5}
    assert body["op"] == "r" and body["unparsed"] == ["id"]


def test_a_composite_value_its_codec_refuses_is_decoded_again_by_the_rechecked_shape(
        ) -> None:
    # PostgreSQL announces no ALTER TYPE … ADD ATTRIBUTE: the shape's recheck reads the
    # catalog again and hands back the relation's new shape (None: the type is unchanged),
    # and the whole row is decoded again with it, carrying its schema version
    pair = composite_codec([("a", decode_int), ("b", decode_int)])
    triple = composite_codec([("a", decode_int), ("b", decode_int), ("c", decode_int)])
    relation = Relation(7, "public", "pairs", "d",
                        (Column(True, "id", INT4, -1), Column(False, "p", 16400, -1),
                         Column(False, "q", 16400, -1)))
    asked: list[int] = []

    def recheck(index: int) -> TableShape | None:
        asked.append(index)
        if len(asked) > 1:
            return None
        return TableShape.of(relation, "app.public.pairs", (decode_int, triple, triple), None,
                             2, recheck)

    shape = TableShape.of(relation, "app.public.pairs", (decode_int, pair, pair), None, 1,
                          recheck)
    bodies = [orjson.loads(read_event(shape, ["1", p, q], 16).body)
              for p, q in (("(1,2)", "(0,0)"), ("(3,4,5)", "(5,6,7)"), ("(6,7,8,9)", "(1,2)"))]
    assert [(body["after"]["p"], body["after"]["q"]) for body in bodies] == [
        ({"a": 1, "b": 2}, {"a": 0, "b": 0}), ({"a": 3, "b": 4, "c": 5}, {"a": 5, "b": 6, "c": 7}),
        ("(6,7,8,9)", {"a": 1, "b": 2})]
    assert [body.get("unparsed") for body in bodies] == [None, None, ["p"]]
    assert [body["schema_version"] for body in bodies] == [1, 2, 1]
    assert asked == [1, 1]  # only for values the codec refused, once per value


class _AlterableCatalog(TypeCatalog):
    """pg_catalog as a dictionary of types a test alters (``ALTER TYPE``)."""

    def __init__(self, server: dict[int, TypeInfo]) -> None:
        super().__init__()
        self.server = server

    def load(self, conn: psycopg.Connection[Any], oids: Iterable[int], *,
             refresh: bool = False) -> None:
        self.add(*(self.server[oid] for oid in oids if oid in self.server))


def test_a_composite_type_altered_gets_a_schema_version_recorded_before_its_values(
        tmp_path: Path) -> None:
    pair = TypeInfo(16400, "public", "pair", "composite", attributes=(("a", INT4), ("b", INT4)))
    assembler = _assembler(tmp_path)
    catalog = assembler.shapes.catalog = _AlterableCatalog({16400: pair})
    relation = Relation(7, "public", "pairs", "d",
                        (Column(True, "id", INT4, -1), Column(False, "p", 16400, -1)))
    _transaction(assembler, 1, relation, Insert(7, ("1", "(1,2)")))
    catalog.server[16400] = replace(pair, attributes=(*pair.attributes, ("c", INT4)))
    _transaction(assembler, 2, Insert(7, ("2", "(3,4,5)")), Insert(7, ("3", "(6,7,8)")))
    records = [(r.topic, orjson.loads(r.value)) for r in assembler.ready]
    assert [(topic.rsplit(".", 1)[-1], value.get("schema_version")) for topic, value
            in records] == [("_schemas", 1), ("pairs", 1), ("_schemas", 2), ("pairs", 2),
                            ("pairs", 2)]
    recorded = records[2][1]
    detail = {c["name"]: c.get("type_detail") for c in recorded["columns"]}["p"]
    assert [a["name"] for a in detail["attributes"]] == ["a", "b", "c"]
    assert recorded["since_lsn"] == 0x200  # the commit LSN of the first value read so
    assert [value["after"]["p"] for _, value in records[3:]] == [
        {"a": 3, "b": 4, "c": 5}, {"a": 6, "b": 7, "c": 8}]
    # row 1 holds (1,2,NULL) now, unwritten: the table is read again
    assert assembler.rewritten == [RowsRewritten(
        "public.pairs", "altered the composite type of p", 0x200, None)]
    # the Relation again (a new session): its columns are those of version 2
    assembler.feed(relation, 0x2F0)
    assert not assembler.shapes.has_rechecked and assembler.shapes.get(7).schema_version == 2


def test_an_alter_type_message_records_the_new_version_and_rereads_without_a_value(
        tmp_path: Path) -> None:
    """With the DDL capture, the ``ALTER TYPE``'s message alone (nobody writes the table
    after it) reads the composite types again: the new schema version is recorded, in
    the transaction of the DDL, and the table is read again."""
    pair = TypeInfo(16400, "public", "pair", "composite", attributes=(("a", INT4), ("b", INT4)))
    assembler = _assembler(tmp_path)
    assembler.topic_of_prefix[DDL_PREFIX] = "app._ddl"
    catalog = assembler.shapes.catalog = _AlterableCatalog({16400: pair})
    relation = Relation(7, "public", "pairs", "d",
                        (Column(True, "id", INT4, -1), Column(False, "p", 16400, -1)))
    _transaction(assembler, 1, relation, Insert(7, ("1", "(1,2)")))
    catalog.server[16400] = replace(pair, attributes=(*pair.attributes, ("c", INT4)))

    def ddl(tag: str) -> LogicalMessage:
        content = orjson.dumps({"event": "ddl_command_end", "tag": tag, "command": "…",
                                "objects": [{"type": "composite type",
                                             "identity": "public.pair"}]})
        return LogicalMessage(True, 0x1F0, DDL_PREFIX, content)

    _transaction(assembler, 2, ddl("CREATE INDEX"))
    assert not assembler.rewritten, "another DDL: the types are not read again"
    _transaction(assembler, 3, ddl("ALTER TYPE"))
    records = [(r.topic.rsplit(".", 1)[-1], orjson.loads(r.value)) for r in assembler.ready]
    assert [topic for topic, _ in records] == [
        "_schemas", "pairs", "_ddl", "_ddl", "_schemas"]
    recorded = records[-1][1]
    assert recorded["schema_version"] == 2 and recorded["since_lsn"] == 0x300
    detail = {c["name"]: c.get("type_detail") for c in recorded["columns"]}["p"]
    assert [a["name"] for a in detail["attributes"]] == ["a", "b", "c"]
    assert assembler.rewritten == [RowsRewritten(
        "public.pairs", "altered the composite type of p", 0x300, None)]
    _transaction(assembler, 4, Insert(7, ("2", "(3,4,5)")))
    assert _events(assembler)[-1]["after"]["p"] == {"a": 3, "b": 4, "c": 5}
    assert _events(assembler)[-1]["schema_version"] == 2


def test_a_key_change_under_replica_identity_full_is_completed_from_the_old_row() -> None:
    text = 25
    relation = Relation(7, "public", "docs", "f",
                        (Column(True, "id", INT4, -1), Column(False, "a", text, -1),
                         Column(False, "b", text, -1), Column(False, "c", text, -1)))
    shape = TableShape.of(relation, "app.public.docs", (decode_int, str, str, str), ["id"], 1)
    new = ("2", UNCHANGED_TOAST, "new b", UNCHANGED_TOAST)
    moved = update_events(shape, "O", ("1", "old a", "old b", None), new, 16)
    delete, insert = (orjson.loads(event.body) for event in moved)
    assert (delete["op"], delete["key"], insert["op"], insert["key"]) == (
        "d", {"id": 1}, "c", {"id": 2})
    assert insert["after"] == {"id": 2, "a": "old a", "b": "new b", "c": None}
    assert list(insert["after"]) == ["id", "a", "b", "c"] and insert["unchanged"] == []
    # by key only (REPLICA IDENTITY DEFAULT): nothing to complete it from
    by_key = orjson.loads(update_events(shape, "K", ("1", None, None, None), new, 16)[1].body)
    assert by_key["after"] == {"id": 2, "b": "new b"} and by_key["unchanged"] == ["a", "c"]
    # the same key: the sinks take them from `before` or their stored record
    same = orjson.loads(update_events(shape, "O", ("2", "old a", "old b", None), new,
                                      16)[0].body)
    assert same["op"] == "u" and same["unchanged"] == ["a", "c"]


def test_a_name_that_is_no_valid_topic_gets_an_escaped_topic(tmp_path: Path) -> None:
    assembler = _assembler(tmp_path, TopicNamer("fid"))
    _transaction(assembler, 1, _relation(7, "Sales Dept", "Order Items"), Insert(7, ("1", "0")))
    record = next(r for r in assembler.ready if not r.topic.endswith("_schemas"))
    assert record.topic == "fid.Sales_x20_Dept.Order_x20_Items"
    source = orjson.loads(record.value)["source"]
    assert (source["schema"], source["table"]) == ("Sales Dept", "Order Items")


def test_a_table_joining_on_a_taken_topic_is_refused_naming_both(tmp_path: Path) -> None:
    assembler = _assembler(tmp_path, TopicNamer("p"))
    _transaction(assembler, 1, _relation(7, "public", "a b"), Insert(7, ("1", "0")))
    with pytest.raises(ConfigError, match=r'"public"\."a b".*"public"\."a_x20_b"'):
        assembler.feed(_relation(8, "public", "a_x20_b"), 0x1F0)


def test_a_table_joining_on_the_topic_of_a_published_table_not_yet_seen_is_refused(
        tmp_path: Path) -> None:
    assembler = _assembler(tmp_path, TopicNamer("p"))
    assembler.shapes.claim_topics([("public", "a b"), ("public", "t")])  # at session start
    with pytest.raises(ConfigError, match=r'"public"\."a b".*"public"\."a_x20_b"'):
        assembler.feed(_relation(8, "public", "a_x20_b"), 0x1F0)


def test_a_recreated_table_gets_a_truncate_before_its_first_event(tmp_path: Path) -> None:
    assembler = _assembler(tmp_path)
    _transaction(assembler, 1, _relation(7), Insert(7, ("1", "1")))
    _transaction(assembler, 2, _relation(7), Insert(7, ("2", "2")))  # the same relation
    _transaction(assembler, 3, _relation(9), Insert(9, ("3", "3")))  # dropped, created
    renamed = Relation(9, "public", "t2", "d", _relation(9).columns)
    _transaction(assembler, 4, renamed, Insert(9, ("4", "4")))  # a rename: no truncate
    events = _events(assembler)
    assert [(e["op"], e["key"]) for e in events] == [
        ("c", {"id": 1}), ("c", {"id": 2}), ("t", {}), ("c", {"id": 3}), ("c", {"id": 4})]
    truncate = events[2]
    assert truncate["truncate"]["recreated"] is True
    assert truncate["source"]["seq"] == 0 and events[3]["source"]["seq"] == 1
    assert truncate["source"]["commit_lsn"] == events[3]["source"]["commit_lsn"]


def test_the_event_schema_documents_every_field_written(tmp_path: Path) -> None:
    schema = EVENT_JSON_SCHEMA
    assembler = _assembler(tmp_path)
    _transaction(assembler, 1, _relation(7), Insert(7, ("1", "?")))
    _transaction(assembler, 2, _relation(9), Insert(9, ("2", "2")))
    events = _events(assembler)
    assert {"unparsed", "truncate"} <= {key for event in events for key in event}
    for event in events:
        assert set(schema["required"]) <= set(event) <= set(schema["properties"])
        assert set(event["source"]) == set(schema["properties"]["source"]["required"])
        assert set(event.get("truncate", {})) <= set(schema["properties"]["truncate"]
                                                     ["properties"])


def test_the_fallback_counter_is_exported() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from cdc.capture.runner import CaptureStats
    from cdc.observability.exposition import StatusCollector
    from cdc.observability.probes import CaptureProbe

    stats = CaptureStats()
    stats.decode_fallbacks.record("public.metric_t", "col", 16, ValueError("x"))
    registry = CollectorRegistry()
    registry.register(StatusCollector(CaptureProbe(stats, None, lambda: True), "slot", None,
                                      lambda: []))
    text = generate_latest(registry).decode()
    count = stats.decode_fallbacks.snapshot()[("public.metric_t", "col")]
    assert ('distributary_capture_decode_fallbacks_total{column="col",table="public.metric_t"} '
            f"{float(count)}") in text
