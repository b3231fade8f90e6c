"""OpenSearch: mappings from column types and values, index names, bulk item outcomes."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from connectors.opensearch.bulk import chunked, delete_action, index_action
from connectors.opensearch.errors import ItemOutcome, item_outcome
from connectors.opensearch.mapping import (
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    KEYWORD,
    LONG,
    NUMERIC,
    OBJECT,
    TEXT,
    index_body,
    mapping_for_type,
    mapping_for_value,
    new_fields,
)
from connectors.opensearch.names import index_name

from .sink_events import TableEvents


@pytest.mark.parametrize(("type_name", "mapping"), [
    ("pg_catalog.int4", LONG), ("pg_catalog.int8", LONG), ("pg_catalog.float8", DOUBLE),
    ("pg_catalog.numeric", NUMERIC), ("pg_catalog.bool", BOOLEAN),
    ("pg_catalog.timestamptz", DATE), ("pg_catalog.date", DATE),
    ("pg_catalog.text", TEXT), ("pg_catalog.varchar", TEXT), ("pg_catalog.jsonb", OBJECT),
    ("pg_catalog.bytea", BINARY), ("pg_catalog.uuid", KEYWORD),
    ("pg_catalog.interval", KEYWORD), ("pg_catalog._int4", LONG),
    ("pg_catalog._numeric", NUMERIC), ("public.mood", TEXT), ("pg_catalog.tsvector", TEXT),
    ("int4", LONG),
])
def test_mapping_for_type(type_name: str, mapping: dict[str, Any]) -> None:
    assert mapping_for_type(type_name) == mapping


def test_numeric_keeps_its_digits_and_has_a_double_sub_field() -> None:
    assert NUMERIC["type"] == "keyword"
    assert NUMERIC["fields"]["double"]["type"] == "double"


@pytest.mark.parametrize(("value", "mapping"), [
    (True, BOOLEAN), (3, LONG), (2**62, LONG), (1.5, DOUBLE), ({"a": 1}, OBJECT),
    ([{"a": 1}], OBJECT), ([None, 3], LONG), ([], None), (None, None),
    ("2026-01-01", DATE), ("2026-01-01T10:00:00.123456Z", DATE),
    ("2026-01-01T10:00:00+02:00", DATE), ("hello", TEXT), ("12.50", TEXT),
    ("2026-01-01 is a date", TEXT),
])
def test_mapping_for_value(value: Any, mapping: dict[str, Any] | None) -> None:
    assert mapping_for_value(value) == mapping


def test_new_fields_prefer_column_types_and_skip_known_and_null() -> None:
    documents = [{"id": 1, "price": "12.50", "note": None, "at": "x"},
                 {"id": 2, "note": "hello", "extra": 1.5}]
    found = new_fields(documents, known={"id"}, types={"price": "pg_catalog.numeric",
                                                       "at": "pg_catalog.timestamptz"})
    assert found == {"price": NUMERIC, "at": DATE, "note": TEXT, "extra": DOUBLE}


def test_index_body_records_the_truncate_version_and_tombstone_time() -> None:
    body = index_body("orders", 42, 3600, {"id": LONG})
    assert body["aliases"] == {"orders": {"is_write_index": True}}
    assert body["mappings"]["_meta"] == {"distributary": {"truncate_version": 42}}
    assert body["mappings"]["properties"] == {"id": LONG}
    assert body["settings"]["index"]["gc_deletes"] == "3600s"
    assert body["mappings"]["date_detection"] is False


@pytest.mark.parametrize(("rendered", "name"), [
    ("orders", "orders"), ("Public_Orders", "public_orders"), ("_x", "x"),
    ("a b/c*d", "a_b_c_d"), ("-+_ok", "ok"),
])
def test_index_names(rendered: str, name: str) -> None:
    assert index_name(rendered) == name


def test_index_names_are_bounded_and_not_empty() -> None:
    assert len(index_name("x" * 400).encode()) <= 249
    with pytest.raises(ValueError, match="no usable index name"):
        index_name("__")


@pytest.mark.parametrize(("action", "status", "error", "outcome"), [
    ("index", 201, None, ItemOutcome.DONE),
    ("index", 200, None, ItemOutcome.DONE),
    ("index", 409, "version_conflict_engine_exception", ItemOutcome.DONE),
    ("delete", 404, None, ItemOutcome.DONE),
    ("delete", 409, "version_conflict_engine_exception", ItemOutcome.DONE),
    ("index", 404, "index_not_found_exception", ItemOutcome.RETRY),
    ("index", 429, "es_rejected_execution_exception", ItemOutcome.RETRY),
    ("index", 503, "unavailable_shards_exception", ItemOutcome.RETRY),
    ("index", 500, "some_exception", ItemOutcome.RETRY),
    ("index", 403, "cluster_block_exception", ItemOutcome.RETRY),
    ("index", 400, "mapper_parsing_exception", ItemOutcome.REJECT),
    ("index", 400, "illegal_argument_exception", ItemOutcome.REJECT),
    ("index", 400, "document_parsing_exception", ItemOutcome.REJECT),
])
def test_bulk_item_outcomes(action: str, status: int, error: str | None,
                            outcome: ItemOutcome) -> None:
    assert item_outcome(action, status, error) is outcome


def test_actions_carry_the_external_version() -> None:
    event = TableEvents().upsert({"id": 1, "n": 2**60}, 0x16B37A0, 3)
    header, source, end = index_action(event, "orders", "1", {"n": 2**60}).payload.split(b"\n")
    assert orjson.loads(header) == {"index": {
        "_index": "orders", "_id": "1", "version": (0x16B37A0 << 10) | 3,
        "version_type": "external_gte", "require_alias": True}}
    assert (orjson.loads(source), end) == ({"n": 2**60}, b"")
    delete = delete_action(event, "orders", "1")
    assert delete.payload.count(b"\n") == 1
    assert orjson.loads(delete.payload)["delete"]["version_type"] == "external_gte"


def test_bulk_requests_are_cut_by_count_and_size() -> None:
    table = TableEvents()
    actions = [index_action(table.upsert({"id": n}, 10 + n), "orders", str(n), {"pad": "x" * n})
               for n in range(10)]
    assert [len(c) for c in chunked(actions, 4, 10**6)] == [4, 4, 2]
    sizes = [len(a.payload) for a in actions]
    by_size = chunked(actions, 100, sizes[0] + sizes[1])
    assert [a for chunk in by_size for a in chunk] == actions
    assert all(sum(len(a.payload) for a in c) <= sizes[0] + sizes[1] or len(c) == 1
               for c in by_size)
    assert chunked([], 5, 5) == []
