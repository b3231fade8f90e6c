"""Compaction keeps the newest record per key; tombstones expire; offsets are kept."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.log import Position, Record, StartAt
from cdc.log.file import FileLog, FileLogSettings, housekeeping
from cdc.log.file.compaction import CompactionResult, compact_partition

TOPIC = "app.public.kv"


def write(log: FileLog, key: int, version: int, tombstone: bool = False,
          ts: int | None = None) -> None:
    log.producer().append([Record(TOPIC, b'{"id":%d}' % key,
                                  orjson.dumps({"id": key, "v": version}),
                                  Position(version, key), tombstone, ts)])


def test_compaction_keeps_latest_per_key_and_drops_old_tombstones(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1, segment_bytes=1_500))
    log.admin().create_topic(TOPIC, 1, compacted=True)
    for version in range(1, 21):
        for key in range(5):
            write(log, key, version)
    write(log, 3, 100, tombstone=True, ts=1_000)           # an old delete: expires
    write(log, 4, 101, tombstone=True)                     # a recent delete: kept
    for filler in range(30):                               # roll past the deletes
        write(log, 10 + filler, 200 + filler)
    removed = log.producer().compact(min_dirty_ratio=0.0)
    assert removed > 90
    consumer = log.consumer("after", topics=[TOPIC], start=StartAt.earliest())
    seen: dict[int, tuple[int, bool]] = {}
    offsets = []
    while batch := consumer.poll(1000, timeout=0.3):
        for m in batch:
            seen[orjson.loads(m.key)["id"]] = (orjson.loads(m.value)["v"], m.tombstone)
            offsets.append(m.offset)
    consumer.close()
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert seen[0] == (20, False) and seen[2] == (20, False)
    assert 3 not in seen, "an expired delete removes the key"
    assert seen[4] == (101, True), "a recent delete is kept"
    assert all(seen[10 + f] == (200 + f, False) for f in range(30))
    log.close()


def test_nothing_to_do_below_the_dirty_ratio(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1, segment_bytes=500))
    for key in range(50):
        write(log, key, 1)
    producer = log.producer()
    directory = log_dir / TOPIC / "partition=0"
    result = compact_partition(directory, TOPIC, 0, delete_retention_ms=0, min_dirty_ratio=0.5)
    assert result.records_removed == 0
    assert producer.compact() == 0, "topics are not compacted unless asked"
    log.close()



def test_log_compaction_marks_the_topics_it_compacts(log_dir: Path) -> None:
    # log.compaction compacts topics not created as compacted; a segment whose last
    # records were superseded then ended before the next one began, and every reader
    # (consumers, read_to_end) took it for a truncated file (LogCorruptionError)
    settings = FileLogSettings(default_partitions=1, segment_bytes=600,
                               compact_all_topics=True)
    log = FileLog(log_dir, settings)
    log.admin().create_topic(TOPIC, 1)  # as the capture creates its topics
    version = 0
    for round_ in range(6):  # each segment: two keys of its own, then the hot keys
        for key in (100 + 2 * round_, 101 + 2 * round_, 1, 2, 3):
            version += 1
            write(log, key, version)
    assert log.producer().compact(min_dirty_ratio=0.0) > 10
    offsets, newest = [], {}
    for m in log.read_to_end(TOPIC):
        offsets.append(m.offset)
        newest[orjson.loads(m.key)["id"]] = orjson.loads(m.value)["v"]
    assert offsets == sorted(offsets) and offsets[-1] == version - 1
    assert {key: newest[key] for key in (1, 2, 3)} == {1: 28, 2: 29, 3: 30}
    assert len(newest) == 15
    log.close()


def test_scheduled_compaction_runs_beside_the_appends(log_dir: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # in the append it stalled the capture for seconds each interval (make soak); now a
    # thread compacts while appends go on, and retention leaves that partition alone
    entered, release = threading.Event(), threading.Event()
    real = compact_partition

    def slow(directory: Path, *args: Any, **kwargs: Any) -> CompactionResult:
        entered.set()
        assert release.wait(10)
        return real(directory, *args, **kwargs)

    monkeypatch.setattr(housekeeping, "compact_partition", slow)
    monkeypatch.setattr(housekeeping, "BACKGROUND_COMPACTOR", housekeeping.InThisThread)
    settings = FileLogSettings(default_partitions=1, segment_bytes=600, compact_all_topics=True,
                               compaction_interval_ms=0, retention_bytes=1)
    log = FileLog(log_dir, settings)
    log.admin().create_topic(TOPIC, 1)
    producer = log.producer()
    write(log, 1, 1)
    assert entered.wait(5), "a scheduled compaction started"
    directory = log_dir / TOPIC / "partition=0"
    for version in range(2, 40):  # appends go on while the compaction is held
        write(log, 1, version)
    segments = sorted(directory.glob("*.jsonl"))
    assert len(segments) > 3
    assert producer.enforce_retention() == 0, "the partition being compacted is left alone"
    release.set()
    producer.compact()  # waits for the background one first
    assert producer.enforce_retention() > 0, "retention acts once it is done"
    log.close()


def event(key: int, version: int, unchanged: list[str]) -> Record:
    """An update event of ``key``; ``unchanged``: TOASTed columns it leaves out."""
    after = {"id": key, "v": version, **({} if "body" in unchanged else {"body": f"b{version}"})}
    return Record(TOPIC, b'{"id":%d}' % key,
                  orjson.dumps({"op": "u", "key": {"id": key}, "after": after,
                                "unchanged": unchanged}), Position(version, key), False)


def test_compaction_keeps_the_records_holding_values_left_out_since(log_dir: Path) -> None:
    # compacted to its newest record, a key whose newest update left the TOASTed body out
    # lost the body: every reader filling unchanged columns from the key's earlier records
    # found none
    log = FileLog(log_dir, FileLogSettings(default_partitions=1, segment_bytes=1_500))
    log.admin().create_topic(TOPIC, 1, compacted=True)
    producer = log.producer()
    version = 0
    for round_ in range(8):
        for key in (1, 2, 3):
            version += 1
            # key 1: whole rows until round 5, then only updates leaving the body out;
            # key 2: never a whole row in the log (its insert was before it); key 3: whole
            partial = (key == 1 and round_ >= 5) or key == 2
            producer.append([event(key, version, ["body"] if partial else [])])
    for filler in range(30):  # roll past them
        write(log, 10 + filler, 100 + filler)
    assert producer.compact(min_dirty_ratio=0.0) > 0
    kept: dict[int, list[tuple[int, str | None]]] = {}
    for m in log.read_to_end(TOPIC):
        value = orjson.loads(m.value)
        if "after" in value:
            kept.setdefault(value["key"]["id"], []).append(
                (value["after"]["v"], value["after"].get("body")))
    assert [body for _, body in kept[1]] == ["b13", None, None, None], kept[1]
    assert len(kept[2]) == 8, "no whole row: every record kept"
    assert kept[3] == [(24, "b24")], "a whole row: the newest alone, as before"
    log.close()
