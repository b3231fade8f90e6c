"""The Kafka backend's producer: idempotent, ``acks=all``, zstd, durable once delivered.

The capture's producer is transactional (``transactional_id``, one per pipeline): each
append is one Kafka transaction, and ``claim`` (``init_transactions``) fences every
earlier producer with the same id — the replica that was active before, even one that
stalled and wakes up later: its open transaction is aborted and its next commit fails
with ``LogFencedError``. Consumers read committed records only (librdkafka's default).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from cdc.errors import LogError, LogFencedError, TransientError

from ..limits import RecordTooLargeError, record_size
from ..partitioner import partition_for
from ..records import Position, Record
from .admin import KafkaAdmin
from .headers import record_headers
from .reading import TailReader
from .settings import consumer_config, producer_config

DELIVERY_TIMEOUT_S = 120.0
_FENCED = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                     KafkaError.INVALID_PRODUCER_EPOCH})


class KafkaDeliveryError(LogError, TransientError):
    """Kafka did not acknowledge every record of a batch."""


# errors that name why the brokers refuse this client (a login, a certificate, a right):
# the connection errors that follow one ("1/1 brokers are down") do not replace it
REFUSALS = frozenset({KafkaError._AUTHENTICATION, KafkaError._SSL,
                      KafkaError.SASL_AUTHENTICATION_FAILED,
                      KafkaError.TOPIC_AUTHORIZATION_FAILED,
                      KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                      KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})


def reason(code: int | None, text: str | None, error: Any) -> tuple[int | None, str | None]:
    """The problem to show after ``error`` (a ``KafkaError``), given the one shown
    (``code``, ``text``): the newest error, unless the one shown is a refusal and the new
    one is not."""
    if code in REFUSALS and error.code() not in REFUSALS:
        return code, text
    return error.code(), f"Kafka: {error.str()}"


class KafkaProducer:
    """``append`` returns only after Kafka acknowledged every record (acks=all)."""

    def __init__(self, config: dict[str, Any], admin: KafkaAdmin, *,
                 transactional_id: str | None = None) -> None:
        self._config = config
        self._admin = admin
        self._limit = admin.max_record_bytes
        self._transactional_id = transactional_id
        self._claimed = False  # may append: init_transactions done, not fenced since
        self._initialized = False  # the client ran init_transactions (reused: a new one)
        self._producer = self._new_client()
        self._errors: list[str] = []
        self._too_large: list[RecordTooLargeError] = []
        self._tails: TailReader | None = None
        self.topics: set[str] = set()
        """Every topic this producer appended to (the capture's, for ``block`` checks)."""
        self.problem: str | None = None
        """What the client last reported going wrong (a login refused, a broker out of
        reach) while an append waits, until it ends: ``/healthz``'s reason."""
        self._appending = False
        self._problem_code: int | None = None

    def _new_client(self) -> Any:
        extra = ({"transactional.id": self._transactional_id}
                 if self._transactional_id is not None else {})
        return Producer({**self._config, **producer_config(self._limit), **extra,
                         "error_cb": self._client_error})

    def _client_error(self, error: KafkaError) -> None:
        """librdkafka's ``error_cb`` (served while ``append`` flushes or commits): it
        retries on its own; the error is kept to be shown until the append ends (a
        refusal over the connection errors that follow it: ``reason``)."""
        if self._appending:
            self._problem_code, self.problem = reason(self._problem_code, self.problem,
                                                      error)

    def claim(self) -> None:
        """Become the only writer with this producer's transactional id (fencing any
        earlier one, whose open transaction Kafka aborts); a no-op without an id."""
        if self._transactional_id is None:
            return
        if self._initialized:  # claimed before: the client may be fenced, so a new one
            self._producer.purge()
            self._producer = self._new_client()
        self._claimed = False
        self._initialized = True
        try:
            self._producer.init_transactions(DELIVERY_TIMEOUT_S)
        except KafkaException as exc:
            raise KafkaDeliveryError(f"cannot start Kafka transactions (transactional.id "
                                     f"{self._transactional_id}): {exc}") from None
        self._claimed = True

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
        self._appending = True
        try:
            if self._transactional_id is not None:
                self._append_transaction(records)
            else:
                self._send(records)
        finally:
            self._appending = False
            self.problem, self._problem_code = None, None

    def _produce_all(self, records: Sequence[Record]) -> None:
        for record in records:
            count = self._admin.partition_count(record.topic, create=True)
            partition = (record.partition if record.partition is not None
                         else partition_for(record.key, count))
            self._produce(record, partition)

    def _send(self, records: Sequence[Record]) -> None:
        self._produce_all(records)
        remaining = self._producer.flush(DELIVERY_TIMEOUT_S)
        if self._too_large:
            raise self._too_large[0]
        if remaining:
            raise KafkaDeliveryError(f"{remaining} records not acknowledged by Kafka within "
                                     f"{DELIVERY_TIMEOUT_S:.0f} s")
        if self._errors:
            raise KafkaDeliveryError("Kafka rejected records: " + "; ".join(self._errors[:5]))

    def _append_transaction(self, records: Sequence[Record]) -> None:
        """``records`` as one transaction: all of them committed, or none."""
        if not self._claimed:
            raise LogError("the capture's producer appended before claiming the log")
        try:
            self._producer.begin_transaction()
            self._produce_all(records)
            # the commit flushes and fails if any record failed (never flush() here: a
            # fenced client's flush breaks in confluent-kafka)
            self._producer.commit_transaction(DELIVERY_TIMEOUT_S)
        except KafkaException as exc:
            if self._too_large:
                self._abort()
                raise self._too_large[0] from None
            self._failed_transaction(exc)
        except LogError:
            self._abort()
            raise

    def _failed_transaction(self, exc: KafkaException) -> None:
        error = exc.args[0] if exc.args else None
        if error is not None and error.code() in _FENCED:
            self._claimed = False
            raise self._fenced() from None
        if error is not None and error.txn_requires_abort():
            self._abort()
            raise KafkaDeliveryError(f"Kafka aborted the batch's transaction: {error}") \
                from None
        self._claimed = False
        raise KafkaDeliveryError(f"Kafka transaction failed: {exc}") from None

    def _abort(self) -> None:
        try:
            self._producer.abort_transaction(DELIVERY_TIMEOUT_S)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            self._claimed = False
            if error is not None and error.code() in _FENCED:
                raise self._fenced() from None
            raise KafkaDeliveryError(f"cannot abort a Kafka transaction: {exc}") from None

    def _fenced(self) -> LogFencedError:
        return LogFencedError(f"another capture took over the log (transactional.id "
                              f"{self._transactional_id}): this one's batch was not written")

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
        """Deliver anything pending (a transactional producer has nothing pending)."""
        if self._transactional_id is None:
            self._producer.flush(DELIVERY_TIMEOUT_S)
        if self._tails is not None:
            self._tails.close()
            self._tails = None
