"""The snapshot's natively encoded batches (``NativeTable.rows``, for the file log's
``append_encoded``) against the records path: the same partitions in the same order and,
for each, byte for byte the lines ``encode_batch_reference`` (tests/reference/) makes of
the records — also across chunks added to one batch and for rows Python converts
(fallbacks). And the log written both ways holds the same records."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cdc.capture.codecs import decode_date, decode_int, decode_numeric, decode_text
from cdc.capture.events import CommitInfo, TableShape
from cdc.capture.snapshot.native import NativeTable
from cdc.log import Record
from cdc.log.file import FileLog
from cdc.log.file.reader import PartitionReader
from cdc.log.file.topics import partition_dir
from tests.reference.log_codec import encode_batch_reference
from tests.reference.partitioner import partition_for_reference

LSN = (7 << 32) + 0x42
COMMIT = CommitInfo(b'"app"', LSN, 0, "2026-01-02T03:04:05.000006Z", snapshot=True)


def _table() -> NativeTable:
    shape = TableShape(1, "s", "t", "db.s.t", ("id", "name", "amount", "day"),
                       (decode_int, decode_text, decode_numeric, decode_date), (0,), 2,
                       b'"schema":"s","table":"t"')
    table = NativeTable.of(shape)
    assert table is not None
    return table


def _chunk(rng: random.Random, start: int, rows: int) -> bytes:
    lines = []
    for i in range(start, start + rows):
        name = rng.choice([b"a", b"\\N", b"tab\\there", b"\xff\xfe", "é".encode()])
        day = rng.choice([b"2024-02-29", b"0044-03-15 BC", b"\\N"])
        lines.append(b"%d\t%s\t%d.%02d\t%s\n" % (i, name, rng.randrange(10**6), i % 100, day))
    return b"".join(lines)


def _records(table: NativeTable, chunks: list[bytes]) -> list[Record]:
    records: list[Record] = []
    for chunk in chunks:
        records += table.records(chunk, COMMIT, len(records))
    return records


@pytest.mark.parametrize("partitions", [1, 3, 7])
def test_encoded_lines_match_encode_batch_reference(partitions: int) -> None:
    table = _table()
    rng = random.Random(partitions)
    chunks = [_chunk(rng, 0, 40), _chunk(rng, 40, 1), _chunk(rng, 41, 25)]
    rows = None
    seq = 0
    for chunk in chunks:
        rows = table.rows(chunk, COMMIT, seq, rows)
        seq = len(rows)
    assert rows is not None and len(rows) == 66
    records = _records(table, chunks)
    expected: dict[int, list[Record]] = {}
    for record in records:
        p = partition_for_reference(record.key, partitions) if partitions > 1 else 0
        expected.setdefault(p, []).append(record)
    parts = rows.parts(partitions)
    assert [part.partition for part in parts] == list(expected)
    for part in parts:
        mine = expected[part.partition]
        assert part.count == len(mine)
        assert part.last_position == mine[-1].position
        for first, size, last_indexed, interval in [(0, 0, -4096, 4096), (17, 5000, 100, 300)]:
            assert part.encode(first, 1_700_000_000_123, size, last_indexed, interval) == \
                encode_batch_reference(mine, first, 1_700_000_000_123, size, last_indexed,
                                       interval)


def test_append_encoded_writes_what_append_writes(tmp_path: Path) -> None:
    table = _table()
    rng = random.Random(5)
    chunks = [_chunk(rng, 0, 50), _chunk(rng, 50, 30)]
    head = Record("db.s.t", b'{"id":-1}', b'{"op":"t"}')
    tail = Record("db.s.t", b'{"id":1}', b'{"op":"x"}')  # after the rows, where a row is
    logs = []
    for name, encoded in (("records", False), ("encoded", True)):
        log = FileLog(tmp_path / name)
        producer = log.producer()
        if encoded:
            rows = table.rows(chunks[0], COMMIT, 0)
            rows = table.rows(chunks[1], COMMIT, 50, rows)
            producer.append_encoded([[head], rows, [tail]])
        else:
            producer.append([head, *_records(table, chunks), tail])
        producer.close()
        logs.append(log)
    for p in range(logs[0].default_partitions):
        got = []
        for log in logs:
            reader = PartitionReader(partition_dir(log.root, "db.s.t", p), "db.s.t", p)
            got.append([(m.offset, m.key, m.value, m.position, m.tombstone)
                        for m in reader.read()])
            reader.close()
        assert got[0]
        assert got[0] == got[1]
    for log in logs:
        log.close()


def test_lines_appended_not_durable_are_made_so_by_the_function_returned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cdc.log.file.writer import sync_file

    synced: list[str] = []

    def recording(path: str) -> None:
        synced.append(path)
        sync_file(path)

    monkeypatch.setattr("cdc.log.file.producer.sync_file", recording)
    table = _table()
    log = FileLog(tmp_path / "log")
    producer = log.producer()
    rows = table.rows(_chunk(random.Random(7), 0, 60), COMMIT, 0)
    make_durable = producer.append_encoded([rows], durable=False)
    assert make_durable is not None and synced == [], "written, not synced yet"
    written = {p.partition for p in rows.parts(log.default_partitions)}
    make_durable()
    assert len(synced) == len(written), "each segment written, synced once"
    assert producer._unsynced == {}

    # a batch journaled across partitions with lines still unsynced: those are synced first
    more = table.rows(_chunk(random.Random(8), 60, 60), COMMIT, 60)
    later = producer.append_encoded([more], durable=False)
    assert later is not None
    synced.clear()
    producer.append([Record("db.s.t", b'{"id":%d}' % i, b'{"op":"x"}') for i in range(9)])
    assert len(synced) >= len({p.partition for p in more.parts(log.default_partitions)})
    later()
    assert producer._unsynced == {}
    producer.close()
    counts = []
    for p in range(log.default_partitions):
        reader = PartitionReader(partition_dir(log.root, "db.s.t", p), "db.s.t", p)
        counts.append(sum(1 for _ in reader.read()))
        reader.close()
    assert sum(counts) == 60 + 60 + 9
    log.close()
