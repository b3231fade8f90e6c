"""The batch journal: one fdatasync per batch, and what a machine crash took restored."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from cdc.errors import LogError
from cdc.log import StartAt
from cdc.log.file import FileLog, FileLogSettings
from cdc.log.file import checkpoint as checkpoint_module
from cdc.log.file.journal import JournalCorruptionError, journal_files

from .conftest import TOPIC, records, spawn

RECORDS = 500


def crashed_log(log_dir: Path) -> dict[Path, bytes]:
    """A log whose producer died without closing; returns every segment's bytes."""
    proc = spawn("crash", str(log_dir), TOPIC, str(RECORDS))
    assert proc.wait(timeout=60) == 0
    assert journal_files(log_dir), "a producer that died leaves its journal"
    return {p: p.read_bytes() for p in sorted(log_dir.glob(f"{TOPIC}/partition=*/*.jsonl"))}


def read_all(log: FileLog) -> list[tuple[int, int, bytes]]:
    consumer = log.consumer("check", topics=[TOPIC], start=StartAt.earliest())
    seen = []
    while batch := consumer.poll(1_000, timeout=0.3):
        seen += [(m.partition, m.offset, m.key) for m in batch]
    consumer.close()
    return sorted(seen)


def test_batches_lost_from_the_segments_are_restored(log_dir: Path) -> None:
    before = crashed_log(log_dir)
    assert len(before) == 3
    # a machine crash: the page cache never reached the disk (one segment lost its tail,
    # one everything, one is intact)
    first, second, _ = before
    os.truncate(first, len(before[first]) // 2)
    os.truncate(second, 0)
    log = FileLog(log_dir)
    log.producer()
    assert {p: p.read_bytes() for p in before} == before, "byte for byte as written"
    assert [p.stat().st_size for p in journal_files(log_dir)] == [0], \
        "replayed, synced and deleted (the open producer's new file is empty)"
    seen = read_all(log)
    assert len(seen) == RECORDS
    assert sorted(int(key) for _, _, key in seen) == list(range(RECORDS))
    log.close()


def test_a_process_crash_needs_no_replay(log_dir: Path) -> None:
    before = crashed_log(log_dir)
    log = FileLog(log_dir)
    producer = log.producer()
    assert {p: p.read_bytes() for p in before} == before
    producer.append(records(range(RECORDS, RECORDS + 3)))
    assert len(read_all(log)) == RECORDS + 3
    log.close()


def test_a_batch_cut_short_by_the_crash_is_ignored(log_dir: Path) -> None:
    crashed_log(log_dir)
    newest = journal_files(log_dir)[-1]
    with newest.open("ab") as f:
        f.write(b"DJB1\x00\x00\x10\x00")  # a header whose body never made it
    log = FileLog(log_dir)
    log.producer()
    assert len(read_all(log)) == RECORDS
    log.close()


def test_a_damaged_batch_is_located(log_dir: Path) -> None:
    crashed_log(log_dir)
    oldest = journal_files(log_dir)[0]
    data = bytearray(oldest.read_bytes())
    data[40] ^= 0x01  # inside the first batch's body, with more batches after it
    oldest.write_bytes(bytes(data))
    with pytest.raises(JournalCorruptionError) as error:
        FileLog(log_dir).producer()
    assert error.value.file == oldest and error.value.position == 0
    assert "checksum" in str(error.value) and str(oldest) in str(error.value)


def test_records_lost_before_the_journal_are_reported(log_dir: Path) -> None:
    before = crashed_log(log_dir)
    (journal,) = journal_files(log_dir)
    data = journal.read_bytes()
    first_batch = 12 + struct.unpack_from(">I", data, 4)[0]
    journal.write_bytes(data[first_batch:])  # as if the first batch had been checkpointed
    for path in before:  # ... but the segments then lost everything
        os.truncate(path, 0)
    with pytest.raises(LogError, match=r"were lost; check it with `cdc log verify`"):
        FileLog(log_dir).producer()


def test_checkpoints_keep_the_journal_small(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(checkpoint_bytes=4_000))
    producer = log.producer()
    for first in range(0, 2_000, 50):
        producer.append(records(range(first, first + 50)))
        assert len(journal_files(log_dir)) <= 3, "finished files are deleted"
    log.close()
    assert journal_files(log_dir) == [], "a clean close leaves no journal"
    assert len(read_all(FileLog(log_dir))) == 2_000


def test_a_failed_checkpoint_stops_the_producer(log_dir: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_sync(root: Path, segments: object) -> None:
        raise OSError(5, "Input/output error", str(root))

    monkeypatch.setattr(checkpoint_module, "sync_segments", failing_sync)
    log = FileLog(log_dir, FileLogSettings(checkpoint_bytes=1))
    producer = log.producer()
    producer.append(records(range(10)))  # rotates: the checkpoint fails in the background
    with pytest.raises(LogError, match="cannot make the log durable"):
        for first in range(10, 1_000, 10):
            producer.append(records(range(first, first + 10)))
    assert journal_files(log_dir), "the journal is kept for the next start"


def test_without_fsync_there_is_no_journal(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(fsync=False))
    log.producer().append(records(range(10)))
    assert journal_files(log_dir) == []
    log.close()

