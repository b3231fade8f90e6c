"""A difference's cause: the table's columns changed after the sink's record was written."""

from __future__ import annotations

from typing import Any

from connectors.reconcile.compare import Difference, Kind
from connectors.reconcile.schema_history import ColumnChange, column_change, explain

LSN = 0x1_0000_2000


def version(number: int, columns: list[tuple[str, int]], since: int | None) -> dict[str, Any]:
    return {"schema_version": number, "since_lsn": since,
            "columns": [{"name": n, "type_oid": oid, "type_modifier": -1} for n, oid in columns]}


def test_the_last_version_whose_columns_changed_is_the_change() -> None:
    records = [version(3, [("id", 23), ("v", 25)], LSN + 50),   # retyped
               version(1, [("id", 23), ("v", 23), ("note", 25)], None),
               version(2, [("id", 23), ("v", 23)], LSN),         # note dropped
               version(4, [("id", 23), ("v", 25)], LSN + 90)]    # same columns (a key change)
    assert column_change(records) == ColumnChange(3, LSN + 50)


def test_no_change_without_a_second_version_or_its_position() -> None:
    assert column_change([version(1, [("id", 23)], LSN)]) is None
    assert column_change([version(1, [("id", 23)], None),
                          version(2, [("id", 23), ("x", 16)], None)]) is None


def test_a_composite_type_altered_is_a_change_of_its_columns() -> None:
    def pair(*attributes: str) -> dict[str, Any]:
        return {"type": "public.pair", "kind": "composite",
                "attributes": [{"name": a, "type": "pg_catalog.int4", "kind": "base"}
                               for a in attributes]}

    records = [version(1, [("id", 23), ("p", 16400)], LSN),
               version(2, [("id", 23), ("p", 16400)], LSN + 10),
               version(3, [("id", 23), ("p", 16400)], LSN + 20)]
    for record, attributes in zip(records, (("a", "b"), ("a", "b", "c"), ("a", "b", "c")),
                                  strict=True):
        record["columns"][1]["type_detail"] = pair(*attributes)
    assert column_change(records) == ColumnChange(2, LSN + 10)


def difference(kind: Kind, sink_version: int | None) -> Difference:
    return Difference("k", kind, "v: 1 in the table, 2 in the sink", True, sink_version)


def test_only_records_written_before_the_change_are_explained_by_it() -> None:
    change = ColumnChange(2, LSN)
    older, newer = difference(Kind.DIFFERENT, (LSN - 1) << 10 | 7), \
        difference(Kind.DIFFERENT, LSN << 10)
    unversioned, extra = difference(Kind.DIFFERENT, None), difference(Kind.EXTRA, 5)
    explained = explain([older, newer, unversioned, extra], change)
    assert explained[1:] == [newer, unversioned, extra]
    assert explained[0].cause == ("schema changed since the row was written (schema "
                                  "version 2 from 1/2000)")
    assert explained[0].line("public.t redis:c").endswith(
        "2 in the sink; cause: schema changed since the row was written (schema version 2 "
        "from 1/2000)")
    assert explain([older], None) == [older]
