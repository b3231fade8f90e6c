"""Smoke test: the launched Kafka takes idempotent acks=all writes and serves a group."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # admin re-exports it, but untyped

pytestmark = pytest.mark.integration


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` and wait until the broker confirms it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                            replication_factor=1)], operation_timeout=30)
    futures[topic].result(timeout=30)


def test_produce_and_consume_in_a_group(kafka_bootstrap: str, unique_name: str) -> None:
    topic = unique_name
    create_topic(kafka_bootstrap, topic, partitions=3)
    metadata = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(topic, timeout=10)
    assert len(metadata.topics[topic].partitions) == 3

    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True,
                         "acks": "all"})
    reports: list[tuple[int, int]] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        assert err is None, err
        reports.append((msg.partition(), msg.offset()))

    sent = {f"key-{n}".encode(): f"value-{n}".encode() for n in range(30)}
    for key, value in sent.items():
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert len(reports) == 30
    assert {partition for partition, _ in reports} <= {0, 1, 2}

    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": unique_name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    received: dict[bytes, bytes] = {}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(received) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got_key, got_value = msg.key(), msg.value()
            assert got_key is not None and got_value is not None
            received[got_key] = got_value
        consumer.commit(asynchronous=False)
        assignment = {tp.partition for tp in consumer.assignment()}
    finally:
        consumer.close()
    assert received == sent
    assert assignment == {0, 1, 2}
