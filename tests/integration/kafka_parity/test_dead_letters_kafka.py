"""A connector on the Kafka backend puts what its sink refused in the dead-letter topic on
the broker: read back with a plain Kafka client and with ``cdc log dump``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from cdc.cli import main
from cdc.config import ConnectorConfig
from cdc.log import Position, Record
from cdc.log.kafka import KafkaLog
from connectors.runtime import ConnectorRunner
from tests.integration.connectors.webhook_receiver import Receiver, Request, webhook_receiver

pytestmark = pytest.mark.integration


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as running:
        yield running


def broker_records(bootstrap: str, topic: str) -> list[tuple[bytes, Any, dict[str, Any]]]:
    """Key, JSON value and headers of every record of ``topic``, read straight from Kafka."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "dlq-check",
                       "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        partitions = reader.list_topics(topic, timeout=30).topics[topic].partitions
        reader.assign([KafkaTopicPartition(topic, p, 0) for p in partitions])
        found: list[tuple[bytes, Any, dict[str, Any]]] = []
        ended: set[int | None] = set()
        deadline = time.monotonic() + 30
        while len(ended) < len(partitions):
            assert time.monotonic() < deadline, "the dead-letter topic was not read to its end"
            raw = reader.poll(0.5)
            if raw is None:
                continue
            error = raw.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                ended.add(raw.partition())
                continue
            found.append((raw.key() or b"", orjson.loads(raw.value() or b"null"),
                          dict(raw.headers() or ())))
        return found
    finally:
        reader.close()


def test_refused_events_go_to_the_dead_letter_topic_on_kafka(
        kafka_bootstrap: str, unique_name: str, receiver: Receiver) -> None:
    def answer(request: Request) -> tuple[int, dict[str, str]]:
        return (400, {}) if 2 in request.keys else (200, {})

    receiver.answer = answer
    topic, name = f"{unique_name}.public.orders", f"{unique_name}-hook"
    log = KafkaLog([kafka_bootstrap], default_partitions=1)
    try:
        log.producer().append([
            Record(topic, orjson.dumps({"id": key}),
                   orjson.dumps({"op": "u", "key": {"id": key}, "before": None,
                                 "after": {"id": key}, "unchanged": []}),
                   Position(500 + key, 0)) for key in range(6)])
        connector = ConnectorConfig.model_validate({
            "name": name, "type": "webhook", "topics": [topic], "batch_size": 3,
            "batch_timeout": "50ms", "config": {"url": receiver.url, "timeout": "2s"}})
        runner = ConnectorRunner(connector, log, topic_prefix=unique_name)
        runner.start()
        deadline = time.monotonic() + 60
        try:
            while [(g.partition, g.committed) for g in log.admin().group_lag(name)] != [(0, 6)]:
                assert not runner.failures, runner.failures
                assert time.monotonic() < deadline, "the connector did not commit 6 events"
                time.sleep(0.2)
        finally:
            runner.stop()
            assert runner.join(30)
        assert sorted(receiver.accepted_keys()) == [0, 1, 3, 4, 5]
    finally:
        log.close()

    dead_letters = f"{unique_name}.dlq.{name}"
    [(key, letter, headers)] = broker_records(kafka_bootstrap, dead_letters)
    assert key == b'{"id":2}'
    assert letter["error_type"] == "WebhookRejectedError"
    assert str(letter["error"]).startswith(f"WebhookRejectedError: {receiver.url} answered 400")
    source = dict(letter["source"])
    assert source.pop("timestamp_ms") > 0
    assert source == {"topic": topic, "partition": 0, "offset": 2, "commit_lsn": 502, "seq": 0}
    assert letter["event"] == {"op": "u", "key": {"id": 2}, "before": None, "after": {"id": 2},
                               "unchanged": []}
    assert headers["lsn"] == b"502", "the source position travels with the letter"

    dumped = CliRunner().invoke(main, ["log", "dump", dead_letters, "--bootstrap-servers",
                                       kafka_bootstrap])
    assert dumped.exit_code == 0, dumped.output
    assert [orjson.loads(line) for line in dumped.output.splitlines()] == [letter]
