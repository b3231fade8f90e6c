"""OpenSearch: mappings of ranges, composites and domains from a schema record's
``type_detail``, and the values a mapping cannot index (kept in ``_source``, counted)."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.opensearch.mapping import (
    BOOLEAN,
    DATE,
    DOUBLE,
    LONG,
    NUMERIC,
    OBJECT,
    TEXT,
    index_body,
    joined_mappings,
    mapping_for_column,
    mapping_for_type,
    new_fields,
    range_mapping,
)
from connectors.opensearch.unindexed import UNINDEXED, UnindexedValues, unindexed_fields
from derived import JoinedView


def base(name: str) -> dict[str, Any]:
    return {"type": f"pg_catalog.{name}", "kind": "base"}


ADDRESS = {"type": "public.address", "kind": "composite", "attributes": [
    {"name": "street", **base("text")}, {"name": "zip", **base("int4")},
    {"name": "tags", "type": "pg_catalog._text", "kind": "array", "of": base("text")},
    {"name": "where", "type": "public.point2", "kind": "composite", "attributes": [
        {"name": "x", **base("float8")}]}]}


@pytest.mark.parametrize(("type_name", "bound"), [
    ("pg_catalog.int4range", LONG), ("pg_catalog.numrange", NUMERIC),
    ("pg_catalog.tstzrange", DATE), ("pg_catalog.daterange", DATE),
    ("pg_catalog.int4multirange", LONG), ("pg_catalog._int8range", LONG),
])
def test_built_in_ranges_are_objects_with_typed_bounds(type_name: str,
                                                       bound: dict[str, Any]) -> None:
    mapping = mapping_for_type(type_name)
    assert mapping == range_mapping(bound)
    assert mapping["properties"]["lower"] == bound
    assert mapping["properties"]["empty"] == BOOLEAN


def test_composites_are_objects_typed_by_their_attributes() -> None:
    assert mapping_for_column(ADDRESS) == {"properties": {
        "street": TEXT, "zip": LONG, "tags": TEXT,
        "where": {"properties": {"x": DOUBLE}}}}
    array = {"type": "public._address", "kind": "array", "of": ADDRESS}
    assert mapping_for_column(array) == mapping_for_column(ADDRESS)


def test_domains_user_ranges_and_enums() -> None:
    price = {"type": "public.price", "kind": "domain", "of": base("numeric")}
    assert mapping_for_column(price) == NUMERIC
    floats = {"type": "public.floatrange", "kind": "range", "of": base("float8")}
    assert mapping_for_column(floats) == range_mapping(DOUBLE)
    assert mapping_for_column({"type": "public.mood", "kind": "enum"}) == TEXT
    assert mapping_for_column({"type": "public.citext", "kind": "base"}) == TEXT
    assert mapping_for_column("pg_catalog.jsonb") == OBJECT


def test_new_fields_take_type_details() -> None:
    found = new_fields([{"a": {"street": "x"}, "n": 1}], known=(), types={"a": ADDRESS,
                                                                           "n": "pg_catalog.int8"})
    assert found == {"a": mapping_for_column(ADDRESS), "n": LONG}


def test_every_index_ignores_malformed_values() -> None:
    body = index_body("t", 0, 60)
    assert body["settings"]["index"]["mapping"] == {"ignore_malformed": True}
    assert DOUBLE["ignore_malformed"] is True and LONG["ignore_malformed"] is True


@pytest.mark.parametrize(("value", "mapping", "unindexed"), [
    ("NaN", DOUBLE, True), ([1.5, "NaN"], DOUBLE, True), (1.5, DOUBLE, False),
    ("12", LONG, False), ("many", LONG, True), ("Infinity", DOUBLE, True),
    (2**64 - 1, LONG, True), (-5, LONG, False), (True, LONG, True),
    ("infinity", DATE, True), ("2026-01-01", DATE, False), ({"a": 1}, DATE, True),
    ([1, 2], OBJECT, True), ("s", OBJECT, True), (12, OBJECT, True), ({"a": 1}, OBJECT, False),
    ([{"a": 1}, None], OBJECT, False), ({"a": 1}, TEXT, True), ("x", TEXT, False),
    ({"lower": "NaN", "upper": 1.0}, range_mapping(DOUBLE), True),
    ([{"lower": 1, "upper": 3}], range_mapping(LONG), False),
])
def test_unindexed_fields(value: Any, mapping: dict[str, Any], unindexed: bool) -> None:
    found = unindexed_fields({"f": value, "other": "x"}, {"f": mapping})
    assert bool(found) is unindexed, found
    if unindexed:
        assert found[0].startswith("f")


def test_unindexed_values_are_counted_per_alias_and_field() -> None:
    counter = UNINDEXED.labels("unit_alias", "f")
    before = counter._value.get()
    total = UnindexedValues().observe("unit_alias", {"f": DOUBLE, "g": LONG},
                                      [{"f": "NaN", "g": 1}, {"f": 2.0}, {"f": "-Infinity"}])
    assert total == 2
    assert counter._value.get() == before + 2


def test_a_joined_record_maps_every_level_by_its_columns_types() -> None:
    view = JoinedView.model_validate({
        "source": "public.orders", "target": "orders", "exclude": ["secret"],
        "rename": {"placed": "placed_at"},
        "lookups": [{"name": "customer", "source": "public.customers",
                     "on": {"customer_id": "id"}, "fields": ["name"]}],
        "nested": [{"name": "items", "source": "public.items", "on": {"id": "order_id"},
                    "lookups": [{"name": "product", "source": "public.products",
                                 "on": {"product_id": "id"}}]}]})
    types = {
        ("public", "orders"): {"id": "pg_catalog.int4", "customer_id": "pg_catalog.int4",
                               "placed": "pg_catalog.timestamptz", "secret": "pg_catalog.text"},
        ("public", "customers"): {"id": "pg_catalog.int4", "name": "pg_catalog.text"},
        ("public", "items"): {"id": "pg_catalog.int8", "order_id": "pg_catalog.int4",
                              "product_id": "pg_catalog.int4", "qty": "pg_catalog.float8"},
    }  # products: not in the schema topic yet
    mapped = joined_mappings(view, types.get)
    assert mapped == {
        "id": LONG, "customer_id": LONG, "placed_at": DATE,
        "customer": {"type": "object", "properties": {"name": TEXT}},
        "items": {"type": "object", "properties": {
            "id": LONG, "order_id": LONG, "product_id": LONG, "qty": DOUBLE,
            "product": {"type": "object", "properties": {}}}},
    }
    # given whole, before the documents' values are looked at (a null customer too)
    found = new_fields([{"id": 1, "customer": None, "items": [], "label": "x"}], ["id"],
                       {}, mapped)
    assert found == {"customer": mapped["customer"], "items": mapped["items"], "label": TEXT}
