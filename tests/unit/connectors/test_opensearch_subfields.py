"""OpenSearch: values below a field mapped as an object that its properties lack (an
attribute added to a composite type, a column added to a joined table) are mapped by
their type where known, else by their value; a natively rendered batch holding one goes
to the Python path, which maps it; the sink's own record of the mappings merges them."""

from __future__ import annotations

from typing import Any

from connectors.opensearch.indices import IndexState
from connectors.opensearch.mapping import (
    DATE,
    LONG,
    NUMERIC,
    OBJECT,
    TEXT,
    mapping_for_column,
    merged,
    new_subfields,
)
from connectors.opensearch.sink import _unmapped_below
from tests.reference.field_kinds import deep_kinds_of, kind_of

from .test_opensearch_typed_mapping import base


def pair(*attributes: tuple[str, str]) -> dict[str, Any]:
    return {"type": "public.pair", "kind": "composite",
            "attributes": [{"name": name, **base(kind)} for name, kind in attributes]}


OLD = pair(("a", "int4"), ("b", "text"))
NEW = pair(("a", "int4"), ("b", "text"), ("price", "numeric"), ("seen_at", "timestamptz"))
MAPPED = {"id": LONG, "p": mapping_for_column(OLD)}


def test_an_added_attribute_is_mapped_by_its_type() -> None:
    documents = [{"id": 1, "p": {"a": 1, "b": "x"}},
                 {"id": 2, "p": {"a": 2, "b": "y", "price": "12.50", "seen_at": None}}]
    found = new_subfields(documents, MAPPED, {"id": "pg_catalog.int4", "p": NEW})
    assert found == {"p": {"properties": {"price": NUMERIC, "seen_at": DATE}}}


def test_without_a_type_the_value_decides_and_a_null_waits() -> None:
    documents = [{"p": {"a": 1, "price": "12.50", "later": None, "n": 3}}]
    assert new_subfields(documents, MAPPED, {}) == {"p": {"properties": {
        "price": TEXT, "n": LONG}}}
    assert new_subfields([{"p": {"a": 1, "b": "x"}}, {"p": None}, {"id": 3}], MAPPED,
                         {}) == {}
    assert new_subfields([{"p": {"a": 1, "later": None}}], MAPPED, {}) == {}


def test_deeper_objects_and_lists_of_objects_are_followed() -> None:
    mapped = {"customer": {"type": "object", "properties": {
                  "name": TEXT, "address": {"properties": {"city": TEXT}}}},
              "items": {"type": "object", "properties": {"line": LONG}},
              "meta": OBJECT}
    given = {"items": {"type": "object", "properties": {"line": LONG, "qty": LONG}}}
    documents = [{"customer": {"name": "Ann", "address": {"city": "Oslo", "zip": "0150"}},
                  "items": [{"line": 1}, {"line": 2, "qty": 3}, "scalar"],
                  "meta": {"anything": {"at": "all"}}}]
    assert new_subfields(documents, mapped, {}, given) == {
        "customer": {"properties": {"address": {"properties": {"zip": TEXT}}}},
        "items": {"properties": {"qty": LONG}}}


def test_the_mappings_merge_as_opensearch_merges_them() -> None:
    added = {"p": {"properties": {"price": NUMERIC}}, "extra": TEXT}
    result = merged(MAPPED, added)
    assert result["p"]["properties"] == {**MAPPED["p"]["properties"], "price": NUMERIC}
    assert result["extra"] == TEXT and result["id"] == LONG
    assert "price" not in MAPPED["p"]["properties"], "the sink's old record is not changed"


def state(mappings: dict[str, Any]) -> IndexState:
    return IndexState("alias", "base", "base-1", set(mappings), 0, dict(mappings))


def test_a_native_batch_with_an_unmapped_value_below_an_object_takes_the_python_path() -> None:
    known = state(MAPPED)
    same = {"id": 1, "p": {"a": 1, "b": "x"}}
    added = {"id": 2, "p": {"a": 2, "b": "y", "price": "1.5"}}
    nulled = {"id": 3, "p": {"a": 3, "b": "z", "later": None, "tags": []}}
    listed = {"id": 4, "p": {"a": 4, "b": "w", "tags": ["t"]}}
    for document, unmapped in ((same, False), (added, True), (nulled, False),
                               (listed, True)):
        kinds = {name: kind_of(value) for name, value in document.items()}
        assert _unmapped_below(known, deep_kinds_of(document), kinds) is unmapped, document
    # below a field not mapped as an object (a jsonb's flat_object): never
    flat = state({"id": LONG, "p": OBJECT})
    assert not _unmapped_below(flat, deep_kinds_of(added), {"id": 0, "p": 0})
    # paths not told: an object in an object field may hold one
    kinds = {name: kind_of(value) for name, value in same.items()}
    assert _unmapped_below(known, None, kinds)
    assert not _unmapped_below(flat, None, kinds)
