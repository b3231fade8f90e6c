"""The pure comparison of ``cdc reconcile``: hashes, kinds, settled or in flight."""

from __future__ import annotations

from connectors.contract import version_of
from connectors.reconcile.compare import (
    Difference,
    Kind,
    StoredRecord,
    chunk_hash,
    compare_chunk,
    compare_row,
    describe_version,
    field_differences,
)

READ = version_of(0x5000, 0)
OLD = version_of(0x4000, 2)
NEW = version_of(0x6000, 0)


def test_equal_chunks_hash_equal_whatever_the_order_and_filtered_rows() -> None:
    a = {"1": {"id": 1, "s": "x"}, "2": {"s": "y", "id": 2}, "3": None}
    b = {"2": {"id": 2, "s": "y"}, "1": {"s": "x", "id": 1}}
    assert chunk_hash(a) == chunk_hash(b)
    assert chunk_hash(a) != chunk_hash({"1": {"id": 1, "s": "x"}})


def test_a_clean_chunk_has_no_difference() -> None:
    expected = {"1": {"id": 1}, "2": None}
    stored = {"1": StoredRecord({"id": 1}, OLD)}
    assert compare_chunk(expected, stored, read_version=READ) == []


def test_each_kind_is_found_row_by_row() -> None:
    expected = {"1": {"id": 1, "s": "a"}, "2": {"id": 2, "s": "b"}, "3": None,
                "4": {"id": 4, "s": "d"}}
    stored = {"2": StoredRecord({"id": 2, "s": "B"}, OLD),
              "3": StoredRecord({"id": 3}, OLD),
              "4": StoredRecord({"id": 4, "s": "d"}, OLD)}
    found = compare_chunk(expected, stored, read_version=READ)
    assert [(d.sink_id, d.kind, d.settled) for d in found] == [
        ("1", Kind.MISSING, True), ("2", Kind.DIFFERENT, True), ("3", Kind.EXTRA, True)]
    assert found[1].detail.startswith('s: "b" in the table, "B" in the sink')
    assert "the view filters this row out" in found[2].detail


def test_a_sink_record_newer_than_the_read_is_not_settled() -> None:
    stored = StoredRecord({"id": 1, "s": "newer"}, NEW)
    difference = compare_row("1", {"id": 1, "s": "old"}, True, stored, read_version=READ)
    assert difference is not None and not difference.settled
    no_version = StoredRecord({"id": 1, "s": "hand-written"}, None)
    written = compare_row("1", {"id": 1, "s": "old"}, True, no_version, read_version=READ)
    assert written is not None and written.settled


def test_a_record_for_no_row_is_extra() -> None:
    difference = compare_row("9", None, False, StoredRecord({"id": 9}, OLD), read_version=READ)
    assert difference is not None
    assert (difference.kind, difference.settled) == (Kind.EXTRA, True)
    assert difference.detail.startswith("no such row in the table")


def test_expiring_sinks_miss_no_record() -> None:
    assert compare_row("1", {"id": 1}, True, None, read_version=READ,
                       missing_is_drift=False) is None
    assert compare_chunk({"1": {"id": 1}}, {}, read_version=READ, missing_is_drift=False) == []


def test_field_differences_name_each_field() -> None:
    text = field_differences({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 5, "d": 4})
    assert text == ("b: 2 in the table, 5 in the sink; c: missing in the sink; "
                    "d: not in the table's record")
    assert field_differences({"a": "x" * 100}, {"a": "y"}).count("…") == 1


def test_versions_read_as_positions() -> None:
    assert describe_version(version_of((1 << 32) | 0x16B3748, 3)) == "1/16B3748#3"
    assert describe_version(None) == "none"
    line = Difference("42", Kind.MISSING, "the row has no record in the sink", True)
    assert line.line("search index orders") == (
        "missing search index orders 42: the row has no record in the sink")
