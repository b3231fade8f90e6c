"""The walk over fakes: clean tables stay quiet, changes in flight are not drift,
drift that persists is reported once, extras come from the listing."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

from connectors.contract import version_of
from connectors.reconcile.compare import Kind, Record, StoredRecord
from connectors.reconcile.source import KeyText, SourceRead, SourceRow
from connectors.reconcile.target import Encoded, HeldPage
from connectors.reconcile.walk import TableWalk


class FakeTable:
    """A table of ``{id: status}`` and a WAL position that moves by 100 per read."""

    name = "public.t"

    def __init__(self, rows: dict[int, str]) -> None:
        self.rows = rows
        self.stamps = dict.fromkeys(rows, 1)
        self.lsn = 1000
        self.on_read: list[Any] = []  # callbacks run after each read (concurrent writes)

    def _read(self, ids: list[int]) -> SourceRead:
        before = self.lsn
        rows = [SourceRow({"id": i}, {"id": i, "s": self.rows[i]}, (str(i),),
                          str(self.stamps[i])) for i in ids]
        self.lsn += 100
        for callback in self.on_read:
            callback()
        return SourceRead(rows, before, self.lsn)

    def write(self, i: int, value: str) -> None:
        self.rows[i] = value
        self.stamps[i] = self.stamps.get(i, 0) + 1

    def chunk(self, after: KeyText | None, limit: int) -> SourceRead:
        start = int(after[0]) if after else 0
        return self._read(sorted(i for i in self.rows if i > start)[:limit])

    def rows_of(self, keys: Sequence[KeyText]) -> SourceRead:
        return self._read(sorted(int(k[0]) for k in keys if int(k[0]) in self.rows))

    def current_lsn(self) -> int:
        return self.lsn


class FakeSink:
    """Records by id with versions."""

    label = "fake"
    missing_is_drift = True

    def __init__(self) -> None:
        self.records: dict[str, StoredRecord] = {}

    def put(self, table: FakeTable, i: int, lsn: int) -> None:
        self.records[str(i)] = StoredRecord({"id": i, "s": table.rows[i]}, version_of(lsn, 0))

    def sink_id(self, row: SourceRow) -> str | None:
        return str(row.key["id"])

    def expected(self, rows: Sequence[SourceRow]) -> dict[str, Record | None]:
        return {str(r.key["id"]): dict(r.after) for r in rows}

    def read(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        return {i: self.records[i] for i in ids if i in self.records}

    def read_now(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        return self.read(ids)

    def encoded(self, rows: Sequence[SourceRow]) -> Encoded | None:
        return None  # compared as records

    def held(self, ids: Sequence[str]) -> dict[str, bytes]:
        raise AssertionError("a sink without bytes is read as records")

    def scan(self) -> Iterator[HeldPage] | None:
        return None

    def listing(self) -> Iterator[str]:
        return iter(list(self.records))

    def versions(self, ids: Sequence[str]) -> Mapping[str, int | None]:
        return {i: self.records[i].version for i in ids if i in self.records}

    def delete(self, sink_id: str, version: int) -> bool:
        return self.records.pop(sink_id, None) is not None

    def close(self) -> None:
        pass


class FakeIndex(FakeSink):
    """A sink of JSON documents read whole (``scan``), in pages of 2, in the reverse of
    key order."""

    def __init__(self) -> None:
        super().__init__()
        self.pages_read = 0


    def encoded(self, rows: Sequence[SourceRow]) -> Encoded:
        return {str(r.key["id"]): (orjson.dumps(r.after), r) for r in rows}

    def read(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        return super().read(ids)  # suspects are read again by id

    def scan(self) -> Iterator[HeldPage]:
        held = sorted(self.records.items(), key=lambda item: -int(item[0]))
        for start in range(0, len(held), 2):
            self.pages_read += 1
            yield [(i, orjson.dumps(r.record), r.version) for i, r in held[start:start + 2]]


class FakeCache(FakeSink):
    """A sink of JSON values read by id as bytes (``held``)."""

    def __init__(self) -> None:
        super().__init__()
        self.held_reads = 0

    def encoded(self, rows: Sequence[SourceRow]) -> Encoded:
        return {str(r.key["id"]): (orjson.dumps(r.after), r) for r in rows}

    def held(self, ids: Sequence[str]) -> dict[str, bytes]:
        self.held_reads += 1
        return {i: orjson.dumps(self.records[i].record) for i in ids if i in self.records}


def _synced(n: int, sink: FakeSink | None = None) -> tuple[FakeTable, FakeSink]:
    table, sink = FakeTable({i: "a" for i in range(1, n + 1)}), sink or FakeSink()
    for i in table.rows:
        sink.put(table, i, 10)
    return table, sink


def _walk(table: FakeTable, sink: FakeSink) -> Any:
    return TableWalk(table, [sink], lambda lsn: None, chunk_rows=3).run()


def test_a_synced_table_is_clean() -> None:
    table, sink = _synced(10)
    findings = _walk(table, sink)
    assert (findings.rows, findings.differences) == (10, [])


def test_persistent_drift_is_reported_once_per_key() -> None:
    table, sink = _synced(10)
    del sink.records["4"]
    sink.records["7"] = StoredRecord({"id": 7, "s": "edited"}, version_of(10, 0))
    sink.records["99"] = StoredRecord({"id": 99}, version_of(5, 0))
    found = [(d.sink_id, d.kind) for _, d in _walk(table, sink).differences]
    assert found == [("4", Kind.MISSING), ("7", Kind.DIFFERENT), ("99", Kind.EXTRA)]


def test_a_change_applied_after_the_read_is_not_drift() -> None:
    table, sink = _synced(10)

    def concurrent_update() -> None:  # row 5 changes right after each read; the sink has it
        table.write(5, f"v{table.lsn}")
        sink.put(table, 5, table.lsn)

    table.on_read.append(concurrent_update)
    findings = _walk(table, sink)
    assert findings.differences == []


def test_a_row_deleted_after_the_read_is_not_missing() -> None:
    table, sink = _synced(10)
    deleted: list[int] = []

    def concurrent_delete() -> None:
        if 8 in table.rows and not deleted:
            deleted.append(8)
            del table.rows[8]
            del sink.records["8"]

    table.on_read.append(concurrent_delete)
    assert _walk(table, sink).differences == []


def test_a_row_filtered_out_after_the_read_is_not_missing() -> None:
    table, sink = _synced(10)
    changes = iter(range(3))

    def filtered_then_back() -> None:  # row 6's record leaves the sink, then comes back
        step = next(changes, None)
        if step == 0:
            table.write(6, "hidden")
            del sink.records["6"]
        elif step == 2:
            table.write(6, "a")
            sink.put(table, 6, table.lsn)

    table.on_read.append(filtered_then_back)
    assert _walk(table, sink).differences == []


def test_records_newer_than_the_walk_are_not_extras() -> None:
    table, sink = _synced(3)
    sink.records["50"] = StoredRecord({"id": 50}, version_of(10**6, 0))  # inserted meanwhile
    assert _walk(table, sink).differences == []


def test_a_scanned_sink_is_paired_with_the_rows_whatever_its_order() -> None:
    index = FakeIndex()
    table, sink = _synced(10, index)
    assert _walk(table, sink).differences == []
    assert index.pages_read == 5


def test_a_scanned_sink_reports_the_same_drift() -> None:
    table, sink = _synced(10, FakeIndex())
    del sink.records["4"]
    sink.records["7"] = StoredRecord({"id": 7, "s": "edited"}, version_of(10, 0))
    sink.records["99"] = StoredRecord({"id": 99}, version_of(5, 0))
    found = [(d.sink_id, d.kind) for _, d in _walk(table, sink).differences]
    assert found == [("4", Kind.MISSING), ("7", Kind.DIFFERENT), ("99", Kind.EXTRA)]


def test_a_scanned_sink_with_changes_in_flight_is_clean() -> None:
    table, sink = _synced(10, FakeIndex())

    def concurrent_update() -> None:
        table.write(5, f"v{table.lsn}")
        sink.put(table, 5, table.lsn)

    table.on_read.append(concurrent_update)
    assert _walk(table, sink).differences == []


def test_a_sink_read_as_bytes_reports_the_same_drift() -> None:
    cache = FakeCache()
    table, sink = _synced(10, cache)
    del sink.records["4"]
    sink.records["7"] = StoredRecord({"id": 7, "s": "edited"}, version_of(10, 0))
    sink.records["99"] = StoredRecord({"id": 99}, version_of(5, 0))
    found = [(d.sink_id, d.kind) for _, d in _walk(table, sink).differences]
    assert found == [("4", Kind.MISSING), ("7", Kind.DIFFERENT), ("99", Kind.EXTRA)]
    assert cache.held_reads == 4  # one per chunk of 3


def test_bytes_that_differ_for_equal_records_are_no_drift() -> None:
    table, sink = _synced(4, FakeCache())
    sink.records["2"] = StoredRecord({"s": "a", "id": 2}, version_of(10, 0))  # other order
    assert _walk(table, sink).differences == []
