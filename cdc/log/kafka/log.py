"""``KafkaLog``: the same log contract on a Kafka cluster."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..limits import DEFAULT_MAX_RECORD_BYTES
from ..records import Backpressure, BackpressurePolicy, Message, StartAt
from .admin import KafkaAdmin
from .consumer import KafkaConsumer
from .producer import KafkaProducer
from .reading import read_to_end
from .settings import consumer_config


class KafkaLog:
    """Topics on Kafka; consumer groups are Kafka groups, offsets live in Kafka.

    Backpressure ``block`` is enforced for groups whose consumers this process created
    (``cdc run`` runs capture and connectors together); Kafka keeps no such policy.
    """

    def __init__(self, bootstrap_servers: Sequence[str], *, default_partitions: int = 3,
                 client_config: dict[str, Any] | None = None,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        self._config: dict[str, Any] = {"bootstrap.servers": ",".join(bootstrap_servers),
                                        **(client_config or {})}
        self._admin = KafkaAdmin(self._config, default_partitions, max_record_bytes)
        self._fetch_config = consumer_config(max_record_bytes)
        self._producer: KafkaProducer | None = None
        self._blocking: dict[str, int] = {}

    def producer(self) -> KafkaProducer:
        """The producer (created on first call)."""
        if self._producer is None:
            self._producer = KafkaProducer(self._config, self._admin)
        return self._producer

    def topic_producer(self, topic: str) -> KafkaProducer:
        """A producer of its own (Kafka takes any number); the caller closes it."""
        return KafkaProducer(self._config, self._admin)

    def consumer(self, group: str, *, topics: Sequence[str] = (), pattern: str | None = None,
                 start: StartAt | None = None,
                 backpressure: Backpressure | None = None) -> KafkaConsumer:
        """A new member of Kafka consumer group ``group``."""
        if backpressure is not None and backpressure.policy is BackpressurePolicy.BLOCK:
            self._blocking[group] = backpressure.max_lag
        return KafkaConsumer(self._config, group, topics=topics, pattern=pattern, start=start,
                             backpressure=backpressure, fetch_config=self._fetch_config)

    def read_to_end(self, topic: str) -> Iterator[Message]:
        """Every message of ``topic`` up to its current end offsets, by assigning its
        partitions (no group, no rebalance to wait for); nothing if it does not exist."""
        return read_to_end({**self._config, **self._fetch_config}, topic)

    def admin(self) -> KafkaAdmin:
        """Topics, watermarks and group offsets."""
        return self._admin

    def blocking_lag_exceeded(self) -> bool:
        """True when a ``block`` group of this process lags beyond its bound."""
        return any(lag.lag > bound for group, bound in self._blocking.items()
                   for lag in self._admin.group_lag(group))

    def close(self) -> None:
        """Flush the producer."""
        if self._producer is not None:
            self._producer.close()
            self._producer = None
