"""The Kafka backend's producer: idempotent, ``acks=all``, zstd, durable once delivered."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from cdc.errors import LogError, TransientError

from ..limits import RecordTooLargeError, record_size
from ..partitioner import partition_for
from ..records import Position, Record
from .admin import KafkaAdmin
from .headers import record_headers
from .reading import TailReader
from .settings import consumer_config, producer_config

DELIVERY_TIMEOUT_S = 120.0


class KafkaDeliveryError(LogError, TransientError):
    """Kafka did not acknowledge every record of a batch."""


class KafkaProducer:
    """``append`` returns only after Kafka acknowledged every record (acks=all)."""

    def __init__(self, config: dict[str, Any], admin: KafkaAdmin) -> None:
        self._config = config
        self._admin = admin
        self._limit = admin.max_record_bytes
        self._producer = Producer({**config, **producer_config(self._limit)})
        self._errors: list[str] = []
        self._too_large: list[RecordTooLargeError] = []
        self._tails: TailReader | None = None
        self.topics: set[str] = set()
        """Every topic this producer appended to (the capture's, for ``block`` checks)."""

    def _delivery_report(self, record: Record) -> Any:
        def delivered(error: Any, message: Any) -> None:
            if error is None:
                return
            if error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                self._too_large.append(RecordTooLargeError(
                    record, record_size(record), self._limit,
                    where=f"the broker refused it: max.message.bytes of topic {record.topic}"))
            self._errors.append(f"{message.topic()}[{message.partition()}]: {error}")
        return delivered

    def _check_size(self, record: Record) -> None:
        size = record_size(record)
        if size > self._limit:
            raise RecordTooLargeError(record, size, self._limit)

    def append(self, records: Sequence[Record]) -> None:
        """Send ``records`` (key hashed with murmur2 like the file log) and wait for every
        delivery report; raise KafkaDeliveryError if any failed, RecordTooLargeError (before
        sending anything) if a record exceeds ``log.max_record_bytes``."""
        self._errors.clear()
        self._too_large.clear()
        for record in records:
            self._check_size(record)
        topics = {r.topic for r in records}
        self._admin.create_topics(sorted(topics))
        self.topics |= topics
        for record in records:
            count = self._admin.partition_count(record.topic, create=True)
            partition = (record.partition if record.partition is not None
                         else partition_for(record.key, count))
            self._produce(record, partition)
        remaining = self._producer.flush(DELIVERY_TIMEOUT_S)
        if self._too_large:
            raise self._too_large[0]
        if remaining:
            raise KafkaDeliveryError(f"{remaining} records not acknowledged by Kafka within "
                                     f"{DELIVERY_TIMEOUT_S:.0f} s")
        if self._errors:
            raise KafkaDeliveryError("Kafka rejected records: " + "; ".join(self._errors[:5]))

    def _produce(self, record: Record, partition: int) -> None:
        while True:
            try:
                self._producer.produce(record.topic, record.value, record.key,
                                       partition=partition, headers=record_headers(record),
                                       timestamp=record.timestamp_ms or 0,
                                       on_delivery=self._delivery_report(record))
                return
            except BufferError:  # local queue full: let deliveries drain
                self._producer.poll(0.1)
            except KafkaException as exc:
                if exc.args and exc.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE:
                    self._producer.flush(DELIVERY_TIMEOUT_S)
                    raise RecordTooLargeError(
                        record, record_size(record), self._limit,
                        where="the producer's message.max.bytes") from None
                raise LogError(f"cannot send to topic {record.topic}: {exc}") from exc

    def last_positions(self, topic: str) -> dict[int, Position]:
        """The position of the last record of each partition, read back from Kafka."""
        self._admin.partition_count(topic, create=True)
        if self._tails is None:
            self._tails = TailReader({**self._config, **consumer_config(self._limit)})
        return self._tails.last_positions(topic)

    def close(self) -> None:
        """Deliver anything pending."""
        self._producer.flush(DELIVERY_TIMEOUT_S)
        if self._tails is not None:
            self._tails.close()
            self._tails = None
