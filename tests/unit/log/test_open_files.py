"""Open files and work do not grow with the number of topics: a bounded pool of segment
files, lazy readers, one watch per log, polls that visit only partitions with news."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cdc.log import Message, Position, Record, StartAt
from cdc.log.file import FileLog, FileLogSettings
from cdc.log.file.handles import HandlePool
from cdc.log.file.reader import PartitionReader

TOPICS = 300


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def spread(first: int, count: int, topics: int = TOPICS) -> list[Record]:
    """``count`` records, one per topic in turn, with increasing positions."""
    return [Record(f"app.public.t{(first + i) % topics}", b'{"id":%d}' % (first + i),
                   b'{"n":%d}' % (first + i), Position(1000 + first + i, 0))
            for i in range(count)]


def drain(consumer: object, until: int, timeout: float = 10.0) -> list[Message]:
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(out) < until and time.monotonic() < deadline:
        out.extend(consumer.poll(2000, timeout=0.3))  # type: ignore[attr-defined]
    return out


def test_writers_and_readers_share_a_bounded_pool(log_dir: Path) -> None:
    before = open_fds()
    log = FileLog(log_dir, FileLogSettings(default_partitions=3, open_files=16))
    producer = log.producer()
    for first in range(0, 3 * TOPICS, 150):
        producer.append(spread(first, 150))
        assert open_fds() - before <= 16 + 4
    consumer = log.consumer("g", pattern=r"app\.public\..*", start=StartAt.earliest())
    got = drain(consumer, 3 * TOPICS)
    assert sorted(int(m.key[6:-1]) for m in got) == list(range(3 * TOPICS))
    assert open_fds() - before <= 16 + 8  # pool, writer lock, topic locks, group, inotify
    assert log.handles.peak <= 16
    assert log.handles.evictions > 0
    consumer.close()
    log.close()
    assert open_fds() == before


def test_an_evicted_writer_goes_on_where_it_was(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1, open_files=4,
                                           segment_bytes=600))
    producer = log.producer()
    for round_ in range(6):  # 10 partitions through a pool of two writers' files
        producer.append(spread(round_ * 10, 10, topics=10))
    reopened = FileLog(log_dir)
    consumer = reopened.consumer("g", pattern=r"app\..*", start=StartAt.earliest())
    got = drain(consumer, 60)
    for topic in {m.topic for m in got}:
        offsets = [m.offset for m in got if m.topic == topic]
        assert offsets == list(range(6))
    assert sorted(int(m.key[6:-1]) for m in got) == list(range(60))
    consumer.close()
    reopened.close()
    log.close()


def test_evictions_never_sync_and_a_failed_journal_sync_fails_the_append(
        log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1, open_files=2))
    producer = log.producer()
    producer.append(spread(0, 1, topics=1))

    real = os.fdatasync
    calls: list[int] = []

    def failing_once(fd: int) -> None:  # the first fsync fails
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(5, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fdatasync", failing_once)
    with pytest.raises(OSError, match="Input/output error"):
        producer.append(spread(1, 4, topics=4))  # evictions, then the journal's sync
    producer.append(spread(5, 4, topics=4))
    monkeypatch.undo()
    assert len(calls) == 2, "one fdatasync per batch (the journal's), none at evictions"
    log.close()


def test_readers_open_nothing_until_there_is_data(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=3))
    for t in range(TOPICS):
        log.admin().create_topic(f"app.public.t{t}")
    consumer = log.consumer("g", pattern=r"app\.public\..*", start=StartAt.earliest())
    assert consumer.poll(100, timeout=0.2) == []
    assert len(consumer.assignment()) == 3 * TOPICS
    assert log.handles.open_files == 0
    consumer.close()
    log.close()


def test_a_poll_reads_only_the_partitions_that_grew(log_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=3))
    producer = log.producer()
    producer.append(spread(0, 3 * TOPICS))
    consumer = log.consumer("g", pattern=r"app\.public\..*", start=StartAt.earliest())
    assert len(drain(consumer, 3 * TOPICS)) == 3 * TOPICS
    assert consumer.poll(100, timeout=0.2) == []
    reads: list[str] = []
    original = PartitionReader.read

    def counting(self: PartitionReader, max_records: int = 10_000) -> list[Message]:
        reads.append(self.topic)
        return original(self, max_records)

    monkeypatch.setattr(PartitionReader, "read", counting)
    producer.append(spread(5, 2))  # topics t5 and t6, one partition each
    got = drain(consumer, 2)
    assert sorted(m.topic for m in got) == ["app.public.t5", "app.public.t6"]
    assert set(reads) == {"app.public.t5", "app.public.t6"}
    assert len(reads) <= 4  # each read once with data, at most once more to find the end
    consumer.close()
    log.close()


def test_a_topic_created_later_is_noticed_at_once(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=2))
    log.producer().append(spread(0, 1, topics=1))
    consumer = log.consumer("g", pattern=r"app\.public\..*", start=StartAt.earliest())
    assert len(drain(consumer, 1)) == 1
    started = time.monotonic()
    log.producer().append([Record("app.public.late", b'{"id":1}', b"{}", Position(5000, 0))])
    got = drain(consumer, 1)
    assert [m.topic for m in got] == ["app.public.late"]
    assert time.monotonic() - started < 3  # the doorbell, not the 10 s rescan
    consumer.close()
    log.close()


def test_the_pool_never_closes_files_in_use() -> None:
    class Files:
        file_count = 1
        has_open_files = True

        def __init__(self) -> None:
            self.closed = 0

        def close_files(self) -> None:
            self.closed += 1

    pool = HandlePool(2)
    a, b, c = Files(), Files(), Files()
    with pool.use(a):
        with pool.use(b):
            pass
        with pool.use(c):  # room is made by closing b, the idle one, not a
            assert (a.closed, b.closed) == (0, 1)
    with pool.use(b):
        assert a.closed == 1  # now a was least recently used
    assert pool.peak == 2
