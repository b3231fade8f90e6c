"""The Kafka backend's producer: idempotent, ``acks=all``, durable once delivered."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from cdc.errors import LogError, TransientError

from ..partitioner import partition_for
from ..records import NO_POSITION, Position, Record
from .admin import KafkaAdmin
from .headers import record_headers, to_message

DELIVERY_TIMEOUT_S = 120.0


class KafkaDeliveryError(LogError, TransientError):
    """Kafka did not acknowledge every record of a batch."""


class KafkaProducer:
    """``append`` returns only after Kafka acknowledged every record (acks=all)."""

    def __init__(self, config: dict[str, Any], admin: KafkaAdmin) -> None:
        self._config = config
        self._admin = admin
        self._producer = Producer({**config, "enable.idempotence": True, "acks": "all",
                                   "linger.ms": 5, "compression.type": "lz4",
                                   "max.in.flight.requests.per.connection": 5})
        self._errors: list[str] = []

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self._errors.append(f"{message.topic()}[{message.partition()}]: {error}")

    def append(self, records: Sequence[Record]) -> None:
        """Send ``records`` (key hashed with murmur2 like the file log) and wait for every
        delivery report; raise KafkaDeliveryError if any failed."""
        self._errors.clear()
        for record in records:
            count = self._admin.partition_count(record.topic, create=True)
            partition = (record.partition if record.partition is not None
                         else partition_for(record.key, count))
            while True:
                try:
                    self._producer.produce(record.topic, record.value, record.key,
                                           partition=partition,
                                           headers=record_headers(record),
                                           timestamp=record.timestamp_ms or 0,
                                           on_delivery=self._delivered)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    self._producer.poll(0.1)
        remaining = self._producer.flush(DELIVERY_TIMEOUT_S)
        if remaining:
            raise KafkaDeliveryError(f"{remaining} records not acknowledged by Kafka within "
                                     f"{DELIVERY_TIMEOUT_S:.0f} s")
        if self._errors:
            raise KafkaDeliveryError("Kafka rejected records: " + "; ".join(self._errors[:5]))

    def last_positions(self, topic: str) -> dict[int, Position]:
        """The position of the last record of each partition, read back from Kafka."""
        count = self._admin.partition_count(topic, create=True)
        reader = Consumer({**self._config, "group.id": "distributary-positions",
                           "enable.auto.commit": False})
        positions: dict[int, Position] = {}
        try:
            for partition in range(count):
                low, high = reader.get_watermark_offsets(KafkaTopicPartition(topic, partition),
                                                         timeout=30)
                positions[partition] = NO_POSITION
                if high > low:
                    reader.assign([KafkaTopicPartition(topic, partition, high - 1)])
                    message = reader.poll(30)
                    if message is None or message.error():
                        raise LogError(f"cannot read the last record of {topic}[{partition}]")
                    positions[partition] = to_message(message).position
        except KafkaException as exc:
            raise LogError(f"cannot read positions of {topic}: {exc}") from exc
        finally:
            reader.close()
        return positions

    def close(self) -> None:
        """Deliver anything pending."""
        self._producer.flush(DELIVERY_TIMEOUT_S)
