"""The file log's contract: durable appends, ordered reads, offsets, positions, restarts."""

from __future__ import annotations

from pathlib import Path

import orjson

from cdc.log import Message, Position, StartAt, TopicPartition
from cdc.log.file import FileLog, FileLogSettings

from .conftest import TOPIC, records


def read_all(log: FileLog, group: str = "reader",
             start: StartAt | None = None) -> list[Message]:
    consumer = log.consumer(group, topics=[TOPIC], start=start or StartAt.earliest())
    out = []
    while batch := consumer.poll(500, timeout=0.3):
        out.extend(batch)
    consumer.commit()
    consumer.close()
    return out


def test_every_record_read_once_in_order_per_key(log_dir: Path) -> None:
    log = FileLog(log_dir)
    producer = log.producer()
    producer.append(records(range(0, 300)))
    producer.append(records(range(300, 500)))
    messages = read_all(log)
    assert sorted(orjson.loads(m.key)["id"] for m in messages) == list(range(500))
    for partition in range(3):
        offsets = [m.offset for m in messages if m.partition == partition]
        assert offsets == list(range(len(offsets)))
        ids = [orjson.loads(m.key)["id"] for m in messages if m.partition == partition]
        assert ids == sorted(ids)
    log.close()


def test_same_key_same_partition(log_dir: Path) -> None:
    log = FileLog(log_dir)
    log.producer().append(records(range(10)) + records(range(10)))
    by_key: dict[bytes, set[int]] = {}
    for m in read_all(log):
        by_key.setdefault(m.key, set()).add(m.partition)
    assert all(len(parts) == 1 for parts in by_key.values())
    log.close()


def test_last_positions_survive_reopen(log_dir: Path) -> None:
    log = FileLog(log_dir)
    log.producer().append(records(range(100)))
    expected = log.producer().last_positions(TOPIC)
    log.close()
    reopened = FileLog(log_dir).producer()
    assert reopened.last_positions(TOPIC) == expected
    assert max(expected.values()) == Position(1099, 0)
    reopened.close()


def test_committed_offset_resumes_without_redelivery(log_dir: Path) -> None:
    log = FileLog(log_dir)
    log.producer().append(records(range(50)))
    first = read_all(log, group="g", start=StartAt.committed())
    log.producer().append(records(range(50, 80)))
    second = read_all(log, group="g", start=StartAt.committed())
    assert len(first) == 50
    assert sorted(orjson.loads(m.key)["id"] for m in second) == list(range(50, 80))
    log.close()


def test_segments_roll_and_reader_seeks_through_the_index(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1, segment_bytes=4_000))
    producer = log.producer()
    for start in range(0, 2_000, 100):
        producer.append(records(range(start, start + 100)))
    directory = log_dir / TOPIC / "partition=0"
    assert len(list(directory.glob("*.jsonl"))) > 10
    consumer = log.consumer("seek", topics=[TOPIC], start=StartAt.earliest())
    consumer.poll(1, timeout=1)
    consumer.seek(TopicPartition(TOPIC, 0), 1_234)
    batch = consumer.poll(10, timeout=1)
    assert [m.offset for m in batch] == list(range(1_234, 1_244))
    consumer.close()
    assert len(read_all(log)) == 2_000
    log.close()


def test_start_at_latest_time_and_lsn(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1))
    log.producer().append(records(range(10)))
    assert read_all(log, "latest", StartAt.latest()) == []
    at_lsn = read_all(log, "lsn", StartAt.at_lsn(1005))
    assert [m.position.commit_lsn for m in at_lsn] == [1005, 1006, 1007, 1008, 1009]
    future = read_all(log, "time", StartAt.at_time(10**13))
    assert future == []
    everything = read_all(log, "time0", StartAt.at_time(0))
    assert len(everything) == 10
    log.close()


def test_admin_reports_offsets_and_lag(log_dir: Path) -> None:
    log = FileLog(log_dir)
    log.producer().append(records(range(30)))
    read_all(log, group="g")
    log.producer().append(records(range(30, 40)))
    admin = log.admin()
    assert admin.topics() == [TOPIC]
    infos = admin.partitions(TOPIC)
    assert sum(i.end_offset for i in infos) == 40
    assert sum(lag.lag for lag in admin.group_lag("g")) == 10
    assert admin.groups() == ["g"]
    log.close()


def test_a_poll_shares_out_its_room_among_partitions_with_records(log_dir: Path) -> None:
    """A backlog in one topic (a large transaction) leaves room in every poll for the
    next records of the others."""
    log = FileLog(log_dir, FileLogSettings(default_partitions=1))
    big, small = "app.public.a_big", "app.public.z_small"
    producer = log.producer()
    producer.append(records(range(2_000), topic=big) + records(range(3), topic=small))
    consumer = log.consumer("reader", topics=[big, small], start=StartAt.earliest())
    first = consumer.poll(500, timeout=1.0)
    assert len(first) == 500
    assert [orjson.loads(m.key)["id"] for m in first if m.topic == small] == [0, 1, 2]
    rest = []
    while batch := consumer.poll(500, timeout=0.3):
        rest.extend(batch)
    assert [orjson.loads(m.key)["id"] for m in first + rest if m.topic == big] == \
        list(range(2_000))
    consumer.close()
    log.close()
