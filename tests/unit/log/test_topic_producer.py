"""``FileTopicProducer``: a connector appends to its own topic beside the capture."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cdc.errors import LogError
from cdc.log import Position, Record
from cdc.log.file import FileLog, FileLogSettings, FileTopicProducer
from cdc.log.file.topic_lock import TopicBusyError

from .conftest import REPO, TOPIC, records

DLQ = "app.dlq.search"

CHILD = """
import sys
from cdc.log import Position, Record
from cdc.log.file import FileLog
producer = FileLog(sys.argv[1]).topic_producer(sys.argv[2])
for i in range(int(sys.argv[3]), int(sys.argv[4])):
    producer.append([Record(sys.argv[2], b"%d" % i, b'{"id":%d}' % i, Position(i, 0))])
producer.close()
"""


def letters(ids: range) -> list[Record]:
    return [Record(DLQ, b"%d" % i, b'{"id":%d}' % i, Position(i, 0)) for i in ids]


def read_all(log: FileLog, topic: str) -> list[tuple[int, int]]:
    consumer = log.consumer("check", topics=[topic])
    out: list[tuple[int, int]] = []
    while batch := consumer.poll(1000, timeout=0.3):
        out += [(m.offset, int(m.key)) for m in batch]
    consumer.close()
    return out


def test_appends_beside_the_capture_producer(log_dir: Path) -> None:
    capture = FileLog(log_dir, FileLogSettings(default_partitions=1))
    capture.producer().append(records(range(5)))
    connector = FileLog(log_dir, FileLogSettings(default_partitions=1))
    dead_letters = connector.topic_producer(DLQ)
    dead_letters.append(letters(range(3)))
    capture.producer().append(records(range(5, 10)))
    dead_letters.append(letters(range(3, 4)))
    assert [key for _, key in read_all(connector, DLQ)] == [0, 1, 2, 3]
    assert dead_letters.last_positions(DLQ) == {0: Position(3, 0)}
    assert connector.admin().partitions(DLQ)[0].end_offset == 4
    dead_letters.close()
    connector.close()
    capture.close()


def test_a_topic_has_one_writer_at_a_time(log_dir: Path) -> None:
    capture = FileLog(log_dir)
    capture.producer().append(records(range(3)))
    other = FileTopicProducer(FileLog(log_dir), TOPIC, lock_timeout=0.1)
    with pytest.raises(TopicBusyError, match=f"topic '{TOPIC}' is being written"):
        other.append(records(range(3, 4)))
    other.close()
    capture.close()


def test_writes_only_its_topic(log_dir: Path) -> None:
    producer = FileLog(log_dir).topic_producer(DLQ)
    with pytest.raises(LogError, match=r"writes only 'app\.dlq\.search'"):
        producer.append(records(range(1)))
    producer.close()


def test_two_processes_share_a_topic(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1, segment_bytes=2_000))
    log.admin().create_topic(DLQ, 1)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(log_dir), DLQ, "1000", "1150"],
                             cwd=REPO)
    mine = log.topic_producer(DLQ)
    for i in range(150):
        mine.append(letters(range(i, i + 1)))
    assert child.wait(60) == 0
    mine.close()
    found = read_all(log, DLQ)
    assert [offset for offset, _ in found] == list(range(300)), "offsets stay contiguous"
    assert sorted(key for _, key in found) == list(range(150)) + list(range(1000, 1150))
    log.close()
