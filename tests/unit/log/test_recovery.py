"""Crash recovery and corruption: torn tails are truncated, anything else is located."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import orjson
import pytest

from cdc.errors import LogCorruptionError
from cdc.log import Position, Record, StartAt, TopicPartition, partition_for
from cdc.log.file import FileLog, FileLogSettings
from cdc.log.file.segments import INDEX_ENTRY

from .conftest import TOPIC, records, spawn

ONE = FileLogSettings(default_partitions=1)


def segment(log_dir: Path) -> Path:
    return sorted((log_dir / TOPIC / "partition=0").glob("*.jsonl"))[0]


def test_torn_tail_is_truncated_and_appends_continue(log_dir: Path) -> None:
    log = FileLog(log_dir, ONE)
    log.producer().append(records(range(10)))
    log.close()
    with segment(log_dir).open("ab") as f:
        f.write(b'{"crc":"00000000","offset":10,"ts":1,"lsn":')  # a write cut short
    log = FileLog(log_dir, ONE)
    producer = log.producer()
    assert producer.end_offset(TopicPartition(TOPIC, 0)) == 10
    producer.append(records(range(10, 12)))
    consumer = log.consumer("g", topics=[TOPIC], start=StartAt.earliest())
    assert [m.offset for m in consumer.poll(100, timeout=1)] == list(range(12))
    consumer.close()
    log.close()


def test_nul_filled_tail_after_power_loss_is_truncated(log_dir: Path) -> None:
    log = FileLog(log_dir, ONE)
    log.producer().append(records(range(5)))
    log.close()
    with segment(log_dir).open("ab") as f:
        f.write(b"\0" * 4096)
    log = FileLog(log_dir, ONE)
    assert log.producer().end_offset(TopicPartition(TOPIC, 0)) == 5
    assert segment(log_dir).read_bytes().count(b"\0") == 0
    log.close()


def test_flipped_bit_in_the_middle_is_located(log_dir: Path) -> None:
    log = FileLog(log_dir, ONE)
    log.producer().append(records(range(20)))
    log.close()
    path = segment(log_dir)
    data = bytearray(path.read_bytes())
    lines = data.split(b"\n")
    position = sum(len(line) + 1 for line in lines[:7]) + 40  # inside record 7
    data[position] ^= 0x01
    path.write_bytes(bytes(data))
    log = FileLog(log_dir, ONE)
    consumer = log.consumer("g", topics=[TOPIC], start=StartAt.earliest())
    with pytest.raises(LogCorruptionError) as caught:
        while consumer.poll(100, timeout=0.2):
            pass
    error = caught.value
    assert (error.topic, error.partition, error.offset) == (TOPIC, 0, 7)
    assert error.file == str(path)
    assert error.position == sum(len(line) + 1 for line in lines[:7])
    assert f"{TOPIC}[0] at offset 7" in str(error)
    consumer.close()
    with pytest.raises(LogCorruptionError):
        log.producer()  # the writer's recovery scan refuses it too
        log.producer().append(records(range(1)))
    log.close()


def test_deleted_index_is_rebuilt(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1, segment_bytes=3_000))
    for start in range(0, 500, 50):
        log.producer().append(records(range(start, start + 50)))
    log.close()
    for index in (log_dir / TOPIC / "partition=0").glob("*.index"):
        index.unlink()
    log = FileLog(log_dir, ONE)
    log.producer().append(records(range(500, 510)))
    consumer = log.consumer("g", topics=[TOPIC], start=StartAt.at_lsn(1_400))
    ids: list[int] = []
    while batch := consumer.poll(500, timeout=0.3):
        ids.extend(orjson.loads(m.key)["id"] for m in batch)
    assert ids == list(range(400, 510))
    consumer.close()
    log.close()


def test_kill_9_mid_append_loses_and_duplicates_nothing(log_dir: Path) -> None:
    total = 400_000  # far more than the producer appends before the kill, however fast
    expected: dict[int, list[int]] = {}
    for i in range(total):
        expected.setdefault(partition_for(b"%d" % i, 3), []).append(i)
    proc = spawn("produce", str(log_dir), TOPIC, "0", str(total))
    deadline = time.monotonic() + 30
    # records written, not only a segment created (an empty one comes first; on a busy
    # machine the first lines can take longer than any fixed pause)
    while sum(p.stat().st_size for p in log_dir.glob(f"{TOPIC}/partition=*/*.jsonl")) < 20_000:
        assert time.monotonic() < deadline, "the producer never wrote"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    log = FileLog(log_dir)
    positions = log.producer().last_positions(TOPIC)
    consumer = log.consumer("check", topics=[TOPIC], start=StartAt.earliest())
    seen: dict[int, list[int]] = {0: [], 1: [], 2: []}
    while batch := consumer.poll(5_000, timeout=0.3):
        for m in batch:
            assert m.offset == len(seen[m.partition]), "offsets are dense"
            assert m.value == b'{"id":%s}' % m.key
            seen[m.partition].append(int(m.key))
    consumer.close()
    assert 0 < sum(map(len, seen.values())) < total, "the kill landed mid-run"
    for partition, ids in seen.items():
        assert ids == expected[partition][:len(ids)], "a prefix: no gap, no duplicate"
        if ids:
            assert positions[partition] == Position(ids[-1] + 1, 0)
    # appending again continues right after the recovered end
    log.producer().append(records(range(1)))
    log.close()


def _index_entries(log_dir: Path) -> int:
    return sum(path.stat().st_size // INDEX_ENTRY.size
               for path in (log_dir / TOPIC).glob("partition=*/*.index"))


def _ids_from(log: FileLog, lsn: int) -> list[int]:
    consumer = log.consumer(f"from-{lsn}", topics=[TOPIC], start=StartAt.at_lsn(lsn))
    ids: list[int] = []
    while batch := consumer.poll(5_000, timeout=0.3):
        ids.extend(orjson.loads(m.key)["id"] for m in batch)
    consumer.close()
    return sorted(ids)


def test_index_entries_gathered_in_memory_only_make_seeks_scan_further(
        log_dir: Path) -> None:
    """A journaled writer (a batch over several partitions) writes its index entries in
    runs; meanwhile a seek into the tail is exact, and closing writes the rest. Entries
    lost (a crash, here deleted) are rebuilt from the segments on open."""
    log = FileLog(log_dir)
    for start in range(0, 6_000, 60):  # a few index entries per partition and batch
        log.producer().append([
            Record(r.topic, r.key, r.value + b" " * 200, r.position)
            for r in records(range(start, start + 60))])
    gathered = _index_entries(log_dir)
    assert _ids_from(log, 1000 + 5_500) == list(range(5_500, 6_000))
    log.close()
    written = _index_entries(log_dir)
    assert 0 < gathered < written, "entries were gathered, then written at close"

    for index in (log_dir / TOPIC).glob("partition=*/*.index"):
        index.unlink()
    log = FileLog(log_dir)
    log.producer().append(records(range(6_000, 6_003)))
    assert _ids_from(log, 1000 + 5_990) == list(range(5_990, 6_003))
    log.close()
    assert _index_entries(log_dir) > 0
