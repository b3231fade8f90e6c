"""The log contract, run against both backends: the file log and a real Kafka broker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from cdc.log import Log, Message, Position, Record, StartAt

PARTITIONS = 3


@pytest.fixture(params=["file", "kafka"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Log]:
    if request.param == "file":
        from cdc.log.file import FileLog, FileLogSettings

        opened: Log = FileLog(tmp_path / "log", FileLogSettings(default_partitions=PARTITIONS))
    else:
        from cdc.log.kafka import KafkaLog

        bootstrap = request.getfixturevalue("kafka_bootstrap")
        opened = KafkaLog([bootstrap], default_partitions=PARTITIONS)
    yield opened
    opened.close()


def events(topic: str, ids: range) -> list[Record]:
    return [Record(topic, orjson.dumps({"id": i % 50}), orjson.dumps({"id": i % 50, "n": i}),
                   Position(10_000 + i, 0)) for i in ids]


def drain(log: Log, group: str, topics: list[str], expected: int,
          start: StartAt | None = None, timeout: float = 60.0) -> list[Message]:
    consumer = log.consumer(group, topics=topics, start=start or StartAt.committed())
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(consumer.poll(500, timeout=1.0))
        consumer.commit()
        out.extend(consumer.poll(500, timeout=1.0 if len(out) >= expected else 0))
        consumer.commit()
    finally:
        consumer.close()
    return out


def test_append_then_consume_every_record_once_in_order_per_key(log: Log,
                                                                unique_name: str) -> None:
    topic = f"{unique_name}.public.orders"
    log.admin().create_topic(topic, PARTITIONS)
    log.producer().append(events(topic, range(300)))
    got = drain(log, f"{unique_name}-g", [topic], 300)
    assert sorted(orjson.loads(m.value)["n"] for m in got) == list(range(300))
    per_key: dict[int, list[int]] = {}
    for m in got:
        per_key.setdefault(orjson.loads(m.key)["id"], []).append(orjson.loads(m.value)["n"])
    assert all(ns == sorted(ns) for ns in per_key.values()), "order per key"
    assert all(len({m.partition for m in got if m.key == k}) == 1 for k in {m.key for m in got})


def test_partition_numbers_match_across_backends(log: Log, unique_name: str) -> None:
    from cdc.log import partition_for

    topic = f"{unique_name}.public.keys"
    log.producer().append(events(topic, range(50)))
    got = drain(log, f"{unique_name}-g", [topic], 50)
    assert {(m.key, m.partition) for m in got} == {
        (m.key, partition_for(m.key, PARTITIONS)) for m in got}


def test_commit_resumes_and_fan_out(log: Log, unique_name: str) -> None:
    topic = f"{unique_name}.public.orders"
    log.admin().create_topic(topic, PARTITIONS)
    log.producer().append(events(topic, range(100)))
    first = drain(log, f"{unique_name}-a", [topic], 100)
    other_group = drain(log, f"{unique_name}-b", [topic], 100)
    log.producer().append(events(topic, range(100, 130)))
    resumed = drain(log, f"{unique_name}-a", [topic], 30)
    assert len(first) == 100 and len(other_group) == 100
    assert sorted(orjson.loads(m.value)["n"] for m in resumed) == list(range(100, 130))
    lags = log.admin().group_lag(f"{unique_name}-a")
    assert sum(lag.committed or 0 for lag in lags) == 130
    assert all(lag.lag == 0 for lag in lags)


def test_last_positions_and_start_at_lsn(log: Log, unique_name: str) -> None:
    topic = f"{unique_name}.public.orders"
    log.admin().create_topic(topic, PARTITIONS)
    log.producer().append(events(topic, range(60)))
    positions = log.producer().last_positions(topic)
    assert max(positions.values()) == Position(10_059, 0)
    assert set(positions) == set(range(PARTITIONS))
    from_lsn = drain(log, f"{unique_name}-lsn", [topic], 20, StartAt.at_lsn(10_040))
    assert sorted(m.position.commit_lsn for m in from_lsn) == list(range(10_040, 10_060))
    latest = drain(log, f"{unique_name}-latest", [topic], 1, StartAt.latest(), timeout=3)
    assert latest == []
    infos = log.admin().partitions(topic)
    assert sum(i.end_offset - i.start_offset for i in infos) == 60
    assert topic in log.admin().topics()
