"""Retention by size and time; the drop and block backpressure policies."""

from __future__ import annotations

import os
import time
from pathlib import Path

from cdc.log import Backpressure, BackpressurePolicy, StartAt
from cdc.log.file import FileLog, FileLogSettings

from .conftest import TOPIC, records


def segments(log_dir: Path) -> list[Path]:
    return sorted((log_dir / TOPIC / "partition=0").glob("*.jsonl"))


def fill(log: FileLog, count: int) -> None:
    for start in range(0, count, 50):
        log.producer().append(records(range(start, start + 50)))


def test_retention_by_size_keeps_the_newest(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1, segment_bytes=3_000,
                                           retention_bytes=10_000))
    fill(log, 1_000)
    removed = log.producer().enforce_retention()
    assert removed > 0
    assert sum(p.stat().st_size for p in segments(log_dir)) <= 10_000 + 3_000 + 200
    info = log.admin().partitions(TOPIC)[0]
    assert info.start_offset > 0 and info.end_offset == 1_000
    consumer = log.consumer("late", topics=[TOPIC], start=StartAt.committed())
    first = consumer.poll(10, timeout=1)
    assert first[0].offset == info.start_offset, "a new group starts at the log start"
    consumer.close()
    log.close()


def test_retention_by_time_spares_the_active_segment(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1, segment_bytes=3_000,
                                           retention_ms=60_000))
    fill(log, 500)
    old = time.time() - 3_600
    for path in segments(log_dir):
        os.utime(path, (old, old))
    before = len(segments(log_dir))
    assert log.producer().enforce_retention() == before - 1
    assert len(segments(log_dir)) == 1
    log.close()


def test_drop_policy_skips_to_newest_and_counts(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1))
    consumer = log.consumer("slow", topics=[TOPIC], start=StartAt.earliest(),
                            backpressure=Backpressure(BackpressurePolicy.DROP, 100))
    log.producer().append(records(range(1_000)))
    time.sleep(0.6)
    batch = consumer.poll(10, timeout=1)
    assert consumer.dropped == 1_000
    assert batch == []
    log.producer().append(records(range(1_000, 1_005)))
    assert [m.offset for m in consumer.poll(10, timeout=2)] == list(range(1_000, 1_005))
    consumer.close()
    log.close()


def test_block_policy_reports_excess_lag(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1))
    consumer = log.consumer("strict", topics=[TOPIC], start=StartAt.earliest(),
                            backpressure=Backpressure(BackpressurePolicy.BLOCK, 100))
    log.producer().append(records(range(50)))
    consumer.poll(50, timeout=1)
    consumer.commit()
    assert not log.blocking_lag_exceeded()
    log.producer().append(records(range(50, 300)))
    assert log.blocking_lag_exceeded()
    while consumer.poll(500, timeout=0.2):
        consumer.commit()
    assert not log.blocking_lag_exceeded()
    consumer.close()
    log.close()


def test_history_topics_outlive_retention_and_log_wide_compaction(log_dir: Path) -> None:
    settings = FileLogSettings(default_partitions=1, segment_bytes=3_000,
                               retention_bytes=10_000, compact_all_topics=True,
                               min_dirty_ratio=0.0)
    log = FileLog(log_dir, settings)
    history = "app._schemas"
    for start in range(0, 1_000, 50):
        # the same key over and over: compaction would keep only the last one
        log.producer().append([r._replace(topic=history, key=b'{"id":1}')
                               for r in records(range(start, start + 50))])
        log.producer().append(records(range(start, start + 50)))
    assert log.producer().enforce_retention() > 0, "the ordinary topic lost segments"
    log.producer().compact(min_dirty_ratio=0.0)
    info = log.admin().partitions(history)[0]
    assert (info.start_offset, info.end_offset) == (0, 1_000)
    consumer = log.consumer("history", topics=[history], start=StartAt.earliest())
    seen = 0
    while batch := consumer.poll(500, timeout=0.3):
        seen += len(batch)
    assert seen == 1_000, "every record of the history topic is still there"
    consumer.close()
    log.close()
