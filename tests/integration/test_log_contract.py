"""The log contract, run against both backends: the file log and a real Kafka broker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from cdc.log import Consumer, Log, Message, Position, Record, StartAt

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


def poll_until(consumer: Consumer, expected: int, timeout: float = 60.0) -> list[Message]:
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        out.extend(consumer.poll(500, timeout=0.5))
    return out


def test_pattern_subscription_full_matches_and_follows_new_topics(log: Log,
                                                                  unique_name: str) -> None:
    first, second = f"{unique_name}.public.customers", f"{unique_name}.public.products"
    longer, other = f"{unique_name}.public.customers_audit", f"{unique_name}.public.orders"
    for topic in (first, longer, other):
        log.admin().create_topic(topic, PARTITIONS)
    log.producer().append(events(first, range(10)) + events(longer, range(5))
                          + events(other, range(5)))
    # the shipped compose/pipeline.kafka.yaml's style: anchors, an alternation group, and a
    # non-capturing group that librdkafka's own regex engine refuses
    pattern = rf"(?:{unique_name})\.public\.(customers|products)"
    consumer = log.consumer(f"{unique_name}-p", pattern=pattern, start=StartAt.earliest())
    anchored = log.consumer(f"{unique_name}-q", pattern=rf"^{unique_name}\.public\.customers$",
                            start=StartAt.earliest())
    try:
        got = poll_until(consumer, 10)
        assert {m.topic for m in got} == {first}, "full match: customers_audit is not taken"
        assert len(got) == 10
        assert {m.topic for m in poll_until(anchored, 10)} == {first}
        log.producer().append(events(second, range(100, 107)))  # a new matching topic
        later = poll_until(consumer, 7, timeout=60)
        assert sorted(orjson.loads(m.value)["n"] for m in later) == list(range(100, 107))
        assert {m.topic for m in later} == {second}
        consumer.commit()
    finally:
        consumer.close()
        anchored.close()


def test_read_to_end_reads_a_whole_topic_without_a_group(log: Log, unique_name: str) -> None:
    topic = f"{unique_name}._snapshots"
    assert list(log.read_to_end(topic)) == [], "a topic that does not exist reads as empty"
    log.admin().create_topic(topic, PARTITIONS)
    assert list(log.read_to_end(topic)) == []
    log.producer().append(events(topic, range(200)))
    if log.__class__.__name__ == "KafkaLog":
        # the old way: a fresh group member's first poll returns before its first
        # rebalance is done, which looks exactly like an empty topic
        early = log.consumer(f"{unique_name}-early", topics=[topic], start=StartAt.earliest())
        try:
            assert early.poll(1000, timeout=0.0) == []
        finally:
            early.close()
    got = list(log.read_to_end(topic))
    assert sorted(orjson.loads(m.value)["n"] for m in got) == list(range(200))
    for partition in range(PARTITIONS):
        offsets = [m.offset for m in got if m.partition == partition]
        assert offsets == sorted(offsets) and len(offsets) == len(set(offsets))
    assert log.admin().groups() == [] or not any(
        g.startswith(unique_name) and g != f"{unique_name}-early"
        for g in log.admin().groups()), "reading to the end joins no group"
    log.producer().append(events(topic, range(200, 210)))
    assert len(list(log.read_to_end(topic))) == 210


def test_create_topics_in_one_call(log: Log, unique_name: str) -> None:
    names = [f"{unique_name}.public.t{i}" for i in range(40)]
    log.admin().create_topics(names, PARTITIONS)
    log.admin().create_topics(names, PARTITIONS)  # idempotent
    present = set(log.admin().topics())
    assert set(names) <= present
    assert all(len(log.admin().partitions(n)) == PARTITIONS for n in names[:3])
