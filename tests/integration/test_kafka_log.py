"""Kafka-specific parts of the log: large records, the record size limit, topic limits,
and the last position of a partition that ends in a transaction marker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.admin._resource import ResourceType
from confluent_kafka.cimpl import NewTopic

from cdc.log import Position, Record
from cdc.log.kafka import KafkaLog
from cdc.log.limits import RecordTooLargeError

pytestmark = pytest.mark.integration


@pytest.fixture
def kafka_log(kafka_bootstrap: str) -> Iterator[KafkaLog]:
    opened = KafkaLog([kafka_bootstrap], default_partitions=2,
                      max_record_bytes=4 * 1024 * 1024)
    yield opened
    opened.close()


def test_a_2_mb_record_goes_through_and_a_larger_one_is_refused_clearly(
        kafka_log: KafkaLog, unique_name: str) -> None:
    topic = f"{unique_name}.public.documents"
    body = "x" * (2 * 1024 * 1024)
    value = orjson.dumps({"id": 1, "body": body})
    kafka_log.producer().append([Record(topic, b'{"id":1}', value, Position(0x16B37A0, 2))])
    got = list(kafka_log.read_to_end(topic))
    assert len(got) == 1 and got[0].value == value
    assert kafka_log.admin().topic_limits([topic])[topic] > 4 * 1024 * 1024
    too_large = Record(topic, b'{"id":2}', b"y" * (5 * 1024 * 1024), Position(0x16B3800, 0))
    with pytest.raises(RecordTooLargeError) as raised:
        kafka_log.producer().append([too_large])
    message = str(raised.value)
    for part in (topic, '{"id":2}', "0/16B3800", str(5 * 1024 * 1024 + 72),
                 "log.max_record_bytes"):
        assert part in message, (part, message)
    assert "\n" not in message
    assert len(list(kafka_log.read_to_end(topic))) == 1


def test_a_topic_created_elsewhere_gets_its_limit_raised(kafka_log: KafkaLog,
                                                         kafka_bootstrap: str,
                                                         unique_name: str) -> None:
    topic = f"{unique_name}.public.old"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    assert kafka_log.admin().topic_limits([topic])[topic] < 2 * 1024 * 1024
    value = b"z" * (2 * 1024 * 1024)
    kafka_log.producer().append([Record(topic, b'{"id":1}', value, Position(5, 0))])
    assert [m.value for m in kafka_log.read_to_end(topic)] == [value]


def retention_of(kafka_bootstrap: str, topic: str) -> tuple[str | None, str | None]:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    return entries["retention.ms"].value, entries["retention.bytes"].value


def test_history_topics_keep_their_records_forever(kafka_log: KafkaLog, kafka_bootstrap: str,
                                                   unique_name: str) -> None:
    schemas, events = f"{unique_name}._schemas", f"{unique_name}.public.orders"
    kafka_log.producer().append([Record(schemas, b'{"t":1}', b'{"v":1}', Position(1, 0)),
                                 Record(events, b'{"id":1}', b'{"v":1}', Position(1, 1))])
    assert retention_of(kafka_bootstrap, schemas) == ("-1", "-1")
    assert retention_of(kafka_bootstrap, events) != ("-1", "-1"), "the broker's default"
    # one created elsewhere (or by an older version) is set to keep its records
    older = f"{unique_name}._snapshots"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(older, 1, 1)])[older].result(30)
    other = KafkaLog([kafka_bootstrap])
    try:
        other.admin().create_topics([older])
    finally:
        other.close()
    assert retention_of(kafka_bootstrap, older) == ("-1", "-1")


def test_last_positions_skip_transaction_markers(kafka_log: KafkaLog, kafka_bootstrap: str,
                                                 unique_name: str) -> None:
    topic = f"{unique_name}.public.tx"
    kafka_log.admin().create_topic(topic, 2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap,
                         "transactional.id": unique_name, "compression.type": "zstd"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for n in range(20):
        producer.produce(topic, b"v", b"k", partition=n % 2,
                         headers=[("lsn", b"%d" % (1000 + n)), ("seq", b"0")])
    producer.commit_transaction(30)  # each partition now ends with a commit marker
    expected = {0: Position(1018, 0), 1: Position(1019, 0)}
    # the brokers write the markers after the commit returns; until then a read_committed
    # reader sees nothing yet (the last stable offset has not moved)
    deadline = time.monotonic() + 15
    positions = kafka_log.producer().last_positions(topic)
    while positions != expected and time.monotonic() < deadline:
        time.sleep(0.2)
        positions = kafka_log.producer().last_positions(topic)
    assert positions == expected
    assert len(list(kafka_log.read_to_end(topic))) == 20


def test_doctor_checks_broker_and_topic_limits(kafka_bootstrap: str, unique_name: str,
                                               tmp_path: Path) -> None:
    from cdc.capture.doctor_kafka import kafka_limit_findings
    from cdc.config import load_config

    topic = f"{unique_name}.public.small"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    path = tmp_path / "pipeline.yaml"
    path.write_text(f"""
source:
  dsn: postgresql://postgres@127.0.0.1:1/app
  slot: {unique_name}
  publication: {unique_name}
log:
  backend: kafka
  bootstrap_servers: [{kafka_bootstrap}]
  max_record_bytes: 8MiB
""")
    findings = {f.check: f for f in kafka_limit_findings(load_config(path))}
    broker = findings["kafka message.max.bytes"]
    assert broker.level == "warn" and "below log.max_record_bytes" in broker.detail
    assert "message.max.bytes=" in broker.fix
    topics = findings["kafka max.message.bytes"]
    assert topics.level == "warn" and topic in topics.detail, topics
