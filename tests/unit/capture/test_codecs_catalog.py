"""TypeCatalog: built-in OIDs, user-defined types loaded from (a fake) pg_catalog, caching."""

from __future__ import annotations

from typing import Any, cast

import psycopg

from cdc.capture.codecs import TypeCatalog, TypeInfo, builtin_types, decode_text

# pg_type rows as the catalog query returns them:
# oid, nspname, typname, typtype, typcategory, typelem, typbasetype, typrelid, delimiter,
# rngsubtype, multirange's range
PG_TYPE = {
    20000: (20000, "app", "address", "c", "C", 0, 0, 30000, ",", None, None),
    20001: (20001, "app", "mood", "e", "E", 0, 0, 0, ",", None, None),
    20002: (20002, "app", "_mood", "b", "A", 20001, 0, 0, ",", None, None),
    20003: (20003, "app", "floatrange", "r", "R", 0, 0, 0, ",", 701, None),
    20004: (20004, "app", "floatmultirange", "m", "R", 0, 0, 0, ",", None, 20003),
    20005: (20005, "app", "money2", "d", "N", 0, 1700, 0, ",", None, None),
    20006: (20006, "app", "citext", "b", "S", 0, 0, 0, ",", None, None),
}
PG_ATTRIBUTE = [(30000, "street", 25), (30000, "mood", 20001), (30000, "moods", 20002),
                (30000, "span", 20003), (30000, "price", 20005)]


class FakeResult:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows

    def __iter__(self) -> Any:
        return iter(self.rows)


class FakeInfo:
    server_version = 150000


class FakeConnection:
    """Answers the two catalog queries from the tables above and records the OIDs asked."""

    info = FakeInfo()

    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    def execute(self, query: str, params: tuple[list[int]]) -> FakeResult:
        (oids,) = params
        if "pg_attribute" in query:
            return FakeResult([row for row in PG_ATTRIBUTE if row[0] in oids])
        assert "%s" in query and "pg_type" in query
        self.asked.append(list(oids))
        return FakeResult([PG_TYPE[oid] for oid in oids if oid in PG_TYPE])


def connection(fake: FakeConnection) -> psycopg.Connection[Any]:
    return cast("psycopg.Connection[Any]", fake)


def test_builtin_codecs() -> None:
    catalog = TypeCatalog()
    assert catalog.codec_for(23)("42") == 42
    assert catalog.codec_for(1700)("1.50") == "1.50"
    assert catalog.codec_for(1007)("{1,NULL}") == [1, None]
    assert catalog.codec_for(1020)("{(1,1),(0,0);(2,2),(1,1)}") == ["(1,1),(0,0)",
                                                                  "(2,2),(1,1)"]
    assert catalog.codec_for(3926)("[1,3)") == {"lower": 1, "upper": 3, "lower_inc": True,
                                                "upper_inc": False, "empty": False}
    assert catalog.codec_for(6157)("{}") == []
    assert catalog.codec_for(869)("10.0.0.1/8") == "10.0.0.1/8"
    assert catalog.codec_for(22)("1 2") == "1 2"  # int2vector: text


def test_builtin_table_is_consistent() -> None:
    types = builtin_types()
    for info in types.values():
        if info.kind in ("array", "range", "multirange"):
            assert info.inner in types, info
    assert types[1187].name == "_interval"


def test_unknown_types_keep_their_text() -> None:
    catalog = TypeCatalog()
    assert catalog.get(99999) is None
    assert catalog.codec_for(99999) is decode_text


def test_codecs_are_cached_per_oid_until_types_change() -> None:
    catalog = TypeCatalog()
    first = catalog.codec_for(1007)
    assert catalog.codec_for(1007) is first
    assert catalog.codecs_for([23, 1007]) == (catalog.codec_for(23), first)
    catalog.add(TypeInfo(40000, "app", "t", "enum"))
    assert catalog.codec_for(1007) is not first


def test_load_follows_every_part_of_a_composite() -> None:
    fake = FakeConnection()
    catalog = TypeCatalog()
    catalog.ensure(connection(fake), [20000, 23])
    assert fake.asked == [[20000], [20001, 20002, 20003, 20005]]
    address = catalog.get(20000)
    assert address is not None and address.kind == "composite"
    codec = catalog.codec_for(20000)
    text = '("1 Main St",happy,"{happy,sad}","[0.5,2)",12.30)'
    assert codec(text) == {
        "street": "1 Main St", "mood": "happy", "moods": ["happy", "sad"],
        "span": {"lower": 0.5, "upper": 2.0, "lower_inc": True, "upper_inc": False,
                 "empty": False},
        "price": "12.30"}
    catalog.ensure(connection(fake), [20000])
    assert len(fake.asked) == 2  # nothing missing, nothing asked


def test_multirange_domain_and_extension_types() -> None:
    fake = FakeConnection()
    catalog = TypeCatalog()
    catalog.ensure(connection(fake), [20004, 20005, 20006])
    assert catalog.codec_for(20004)("{[1,2]}") == [
        {"lower": 1.0, "upper": 2.0, "lower_inc": True, "upper_inc": True, "empty": False}]
    assert catalog.codec_for(20005)("9.99") == "9.99"  # a domain decodes as its base type
    assert catalog.codec_for(20006)("MiXeD") == "MiXeD"


def test_reload_reads_a_known_type_again() -> None:
    fake = FakeConnection()
    catalog = TypeCatalog()
    catalog.ensure(connection(fake), [20001])
    catalog.reload(connection(fake), 20001)
    assert fake.asked == [[20001], [20001]]


def test_a_cycle_does_not_recurse_forever() -> None:
    catalog = TypeCatalog()
    catalog.add(TypeInfo(50000, "app", "d1", "domain", 50001),
                TypeInfo(50001, "app", "d2", "domain", 50000))
    assert catalog.codec_for(50000) is decode_text


def test_reload_of_a_builtin_base_type_asks_nothing() -> None:
    fake = FakeConnection()
    TypeCatalog().reload(connection(fake), 1700)  # a domain's Type message names numeric
    assert fake.asked == []
