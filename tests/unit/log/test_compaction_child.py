"""Scheduled compaction in a child process: the same result, none of it in the capture's
process, and a child that never outlives the thread that started it."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.log import Position, Record
from cdc.log.file import FileLog, FileLogSettings, housekeeping
from cdc.log.file.compaction import CompactionResult
from cdc.log.file.compaction_child import CompactionChild, CompactionFailed

TOPIC = "app.public.kv"


def write(log: FileLog, key: int, version: int) -> None:
    log.producer().append([Record(TOPIC, b'{"id":%d}' % key, orjson.dumps({"v": version}),
                                  Position(version, key))])


def newest(log: FileLog) -> tuple[int, dict[int, int]]:
    records = list(log.read_to_end(TOPIC))
    return len(records), {orjson.loads(m.key)["id"]: orjson.loads(m.value)["v"]
                          for m in records}


def test_a_scheduled_compaction_runs_in_a_child_process(log_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def not_here(*args: Any, **kwargs: Any) -> CompactionResult:
        raise AssertionError("compacted in the capture's own process")

    monkeypatch.setattr(housekeeping, "compact_partition", not_here)
    settings = FileLogSettings(default_partitions=1, segment_bytes=600, compact_all_topics=True,
                               compaction_interval_ms=0, min_dirty_ratio=0.0)
    log = FileLog(log_dir, settings)
    log.admin().create_topic(TOPIC, 1)
    version = 0
    for _ in range(10):
        for key in (1, 2, 3):
            version += 1
            write(log, key, version)
    deadline = time.monotonic() + 30
    while (count := newest(log)[0]) >= version and time.monotonic() < deadline:
        time.sleep(0.1)
        write(log, 4, version + 1)  # an append lets the next scheduled round start
    assert count < version, "records superseded were removed"
    assert {key: v for key, v in newest(log)[1].items() if key != 4} == {1: 28, 2: 29, 3: 30}
    log.close()


def test_the_child_compacts_like_compact_partition_and_reports_its_failures(
        log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1, segment_bytes=600))
    for version in range(1, 31):
        write(log, version % 3, version)
    directory = log_dir / TOPIC / "partition=0"
    child = CompactionChild()
    try:
        result = child.compact(directory, TOPIC, 0, delete_retention_ms=0, min_dirty_ratio=0.0)
        assert result.records_removed > 10 and result.segments_rewritten > 1
        assert newest(log)[1] == {0: 30, 1: 28, 2: 29}
        (directory / "00000000000000000000.jsonl").write_bytes(b"not a record\n")
        with pytest.raises(CompactionFailed, match="Error"):
            child.compact(directory, TOPIC, 0, delete_retention_ms=0, min_dirty_ratio=0.0)
        assert child.alive, "a failed partition does not end the child"
    finally:
        child.close()
    assert not child.alive
    log.close()


def test_the_child_is_killed_when_the_thread_that_started_it_ends(tmp_path: Path) -> None:
    children: list[CompactionChild] = []

    def start() -> None:
        child = CompactionChild()
        children.append(child)
        # one answer: the child is past its start-up (where it asks to die with us)
        assert child.compact(tmp_path, TOPIC, 0, delete_retention_ms=0,
                             min_dirty_ratio=0.0) == CompactionResult(0, 0)

    starter = threading.Thread(target=start)
    starter.start()
    starter.join()
    process: subprocess.Popen[bytes] = children[0]._process
    try:
        assert process.wait(10) == -signal.SIGKILL
    finally:
        children[0].close()


class Ending:
    """A compactor that ends after ``lasts`` partitions, as a child killed mid-round."""

    started = 0

    def __init__(self, lasts: int = 1) -> None:
        Ending.started += 1
        self.left = lasts
        self.closed = False

    @property
    def alive(self) -> bool:
        return self.left > 0

    def compact(self, directory: Path, topic: str, partition: int, *,
                delete_retention_ms: int, min_dirty_ratio: float) -> CompactionResult:
        self.left -= 1
        return CompactionResult(1, partition)

    def close(self) -> None:
        self.closed = True


def test_a_child_is_started_only_when_needed_and_again_after_it_ended() -> None:
    Ending.started = 0
    compactor = housekeeping.StartedOnFirstUse(Ending)
    assert Ending.started == 0, "nothing to compact: no process"
    results = [compactor.compact(Path("p"), TOPIC, p, delete_retention_ms=0,
                                 min_dirty_ratio=0.0).records_removed for p in range(3)]
    assert results == [0, 1, 2]
    assert Ending.started == 3
    compactor.close()
