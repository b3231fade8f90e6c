"""Smoke test: PySpark with the resolved ``spark.jars`` reads a Kafka topic in batch."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # admin re-exports it, but untyped

pytestmark = pytest.mark.integration


def test_batch_read_of_a_topic(spark: Any, kafka_bootstrap: str, unique_name: str) -> None:
    topic = unique_name
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)],
                        operation_timeout=30)[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True,
                         "acks": "all"})
    values = [f"event-{n}" for n in range(20)]
    for n, value in enumerate(values):
        producer.produce(topic, key=str(n % 4).encode(), value=value.encode())
    assert producer.flush(30) == 0

    frame = (spark.read.format("kafka")
             .option("kafka.bootstrap.servers", kafka_bootstrap)
             .option("subscribe", topic)
             .option("startingOffsets", "earliest")
             .option("endingOffsets", "latest")
             .load()
             .selectExpr("CAST(value AS STRING) AS value", "partition", "offset"))
    rows = frame.collect()
    assert sorted(row["value"] for row in rows) == sorted(values)
    assert {row["partition"] for row in rows} <= {0, 1}
    assert len({(row["partition"], row["offset"]) for row in rows}) == len(values)
