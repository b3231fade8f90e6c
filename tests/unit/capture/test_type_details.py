"""``describe_type``: a column type's structure for the schema records."""

from __future__ import annotations

from cdc.capture.codecs import TypeCatalog, TypeInfo
from cdc.capture.schema.type_details import describe_type


def test_builtin_types_ranges_and_arrays() -> None:
    catalog = TypeCatalog()
    assert describe_type(catalog, 23) == {"type": "pg_catalog.int4", "kind": "base"}
    assert describe_type(catalog, 1007) == {"type": "pg_catalog._int4", "kind": "array",
                                            "of": {"type": "pg_catalog.int4", "kind": "base"}}
    assert describe_type(catalog, 3910)["of"] == {"type": "pg_catalog.timestamptz",
                                                  "kind": "base"}
    assert describe_type(catalog, 4451)["of"] == {"type": "pg_catalog.int4", "kind": "base"}
    assert describe_type(catalog, 99999) == {"type": "99999", "kind": "unknown"}


def test_composites_and_domains_describe_their_parts() -> None:
    catalog = TypeCatalog()
    catalog.add(TypeInfo(20001, "public", "price", "domain", 1700),
                TypeInfo(20002, "public", "pair", "composite",
                         attributes=(("amount", 20001), ("tags", 1009))),
                TypeInfo(20003, "public", "_pair", "array", 20002))
    assert describe_type(catalog, 20003) == {
        "type": "public._pair", "kind": "array", "of": {
            "type": "public.pair", "kind": "composite", "attributes": [
                {"name": "amount", "type": "public.price", "kind": "domain",
                 "of": {"type": "pg_catalog.numeric", "kind": "base"}},
                {"name": "tags", "type": "pg_catalog._text", "kind": "array",
                 "of": {"type": "pg_catalog.text", "kind": "base"}}]}}


def test_a_type_made_of_itself_stops() -> None:
    catalog = TypeCatalog()
    catalog.add(TypeInfo(20010, "public", "loop", "domain", 20010))
    detail = describe_type(catalog, 20010)
    depth = 0
    while "of" in detail:
        detail, depth = detail["of"], depth + 1
    assert depth == 8
