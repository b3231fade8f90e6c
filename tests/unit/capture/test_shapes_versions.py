"""ShapeRegistry's schema versions: new columns, type changes, renames, recreated tables."""

from __future__ import annotations

from typing import Any, cast

import orjson
import psycopg

from cdc.capture.pgoutput import Column, Relation
from cdc.capture.schema.shapes import ShapeRegistry, versions_from_log
from cdc.log import Record

INT4, INT8, TEXT = 23, 20, 25


class _Info:
    server_version = 150000


class _CatalogConnection:
    """Only built-in types and DEFAULT replica identity: the catalog is never queried."""

    info = _Info()


def _registry(known: dict[str, Any] | None = None) -> ShapeRegistry:
    conn = cast(psycopg.Connection[Any], _CatalogConnection())
    return ShapeRegistry(conn, "app", known)


def _relation(oid: int, name: str, *columns: tuple[str, int]) -> Relation:
    return Relation(oid, "public", name, "d",
                    tuple(Column(i == 0, n, t, -1) for i, (n, t) in enumerate(columns)))


def _value(record: Record | None) -> dict[str, Any]:
    assert record is not None
    value: dict[str, Any] = orjson.loads(record.value)
    return value


def test_a_version_per_column_change_and_none_for_the_same_columns() -> None:
    shapes = _registry()
    first = _value(shapes.learn(_relation(7, "t", ("id", INT4), ("a", INT4))))
    assert first["schema_version"] == 1 and first["relation_oid"] == 7
    assert first["renamed_from"] is None
    assert [(c["name"], c["type"], c["key"]) for c in first["columns"]] == [
        ("id", "pg_catalog.int4", True), ("a", "pg_catalog.int4", False)]
    assert shapes.learn(_relation(7, "t", ("id", INT4), ("a", INT4))) is None
    added = _value(shapes.learn(_relation(7, "t", ("id", INT4), ("a", INT4), ("b", TEXT))))
    retyped = _value(shapes.learn(_relation(7, "t", ("id", INT4), ("a", INT8), ("b", TEXT))))
    assert (added["schema_version"], retyped["schema_version"]) == (2, 3)
    assert retyped["columns"][1]["type"] == "pg_catalog.int8"
    assert shapes.get(7).schema_version == 3 and shapes.get(7).topic == "app.public.t"


def test_a_rename_goes_on_with_the_numbering_under_the_new_name() -> None:
    shapes = _registry()
    shapes.learn(_relation(7, "t", ("id", INT4)))
    shapes.learn(_relation(7, "t", ("id", INT4), ("a", INT4)))
    record = shapes.learn(_relation(7, "t2", ("id", INT4), ("a", INT4)))
    assert record is not None and orjson.loads(record.key) == "public.t2"
    value = _value(record)
    assert value["schema_version"] == 3 and value["renamed_from"] == "public.t"
    assert shapes.get(7).topic == "app.public.t2" and shapes.get(7).schema_version == 3
    assert shapes.learn(_relation(7, "t2", ("id", INT4), ("a", INT4))) is None
    back = _value(shapes.learn(_relation(7, "t", ("id", INT4), ("a", INT4))))
    assert back["schema_version"] == 4 and back["renamed_from"] == "public.t2"


def test_a_table_created_again_under_its_name_is_a_new_version() -> None:
    shapes = _registry()
    shapes.learn(_relation(7, "t", ("id", INT4)))
    again = _value(shapes.learn(_relation(8, "t", ("id", INT4))))
    assert again["schema_version"] == 2 and again["relation_oid"] == 8
    assert again["renamed_from"] is None


def test_versions_survive_a_restart_through_the_schema_topic() -> None:
    shapes = _registry()
    records = [shapes.learn(_relation(7, "t", ("id", INT4))),
               shapes.learn(_relation(7, "t", ("id", INT4), ("a", INT4))),
               shapes.learn(_relation(9, "u", ("id", INT4)))]
    log = [(r.key, r.value) for r in records if r is not None]
    restarted = _registry(versions_from_log(log))
    assert restarted.learn(_relation(7, "t", ("id", INT4), ("a", INT4))) is None
    assert restarted.get(7).schema_version == 2
    # renamed while the capture was down: recognised by the relation's oid
    renamed = _value(restarted.learn(_relation(9, "u2", ("id", INT4))))
    assert renamed["schema_version"] == 2 and renamed["renamed_from"] == "public.u"


def test_records_written_before_relation_oids_were_recorded_still_load() -> None:
    legacy = orjson.dumps({"schema": "public", "table": "t", "schema_version": 4,
                           "columns": [{"name": "id", "type_oid": INT4, "type_modifier": -1,
                                        "type": "pg_catalog.int4", "key": True,
                                        "flag_key": True}],
                           "replica_identity": "d"})
    shapes = _registry(versions_from_log([(b'"public.t"', legacy)]))
    assert shapes.learn(_relation(7, "t", ("id", INT4))) is None
    assert shapes.get(7).schema_version == 4
