"""``KafkaLog``: the same log contract on a Kafka cluster."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..limits import DEFAULT_MAX_RECORD_BYTES
from ..records import Backpressure, BackpressurePolicy, Message, StartAt
from .admin import KafkaAdmin, Replication
from .consumer import SESSION_TIMEOUT_MS, KafkaConsumer
from .policies import GroupPolicies
from .producer import KafkaProducer
from .reading import read_to_end
from .settings import consumer_config
from .topic_reader import KafkaTopicReader


class KafkaLog:
    """Topics on Kafka; consumer groups are Kafka groups, offsets live in Kafka.

    A group's backpressure policy is kept on the cluster (``policies.POLICY_TOPIC``, a
    compacted topic), so the capture holds back for a ``block`` group whose members run
    in other processes or on other machines.
    """

    def __init__(self, bootstrap_servers: Sequence[str], *, default_partitions: int = 3,
                 client_config: dict[str, Any] | None = None,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
                 replication: Replication | None = None,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS) -> None:
        if isinstance(bootstrap_servers, str):  # "host:port[,host:port]", not its letters
            bootstrap_servers = [bootstrap_servers]
        self._config: dict[str, Any] = {"bootstrap.servers": ",".join(bootstrap_servers),
                                        **(client_config or {})}
        self._admin = KafkaAdmin(self._config, default_partitions, max_record_bytes,
                                 replication)
        self._fetch_config = consumer_config(max_record_bytes)
        self._producer: KafkaProducer | None = None
        self._policies = GroupPolicies(self._config, self._admin)
        self._session_timeout_ms = session_timeout_ms

    def producer(self, writer_id: str | None = None) -> KafkaProducer:
        """The producer (created on first call): transactional with ``writer_id`` (the
        capture's), so that ``claim`` fences an earlier one with the same id."""
        if self._producer is None:
            self._producer = KafkaProducer(self._config, self._admin,
                                           transactional_id=writer_id)
        return self._producer

    def topic_producer(self, topic: str) -> KafkaProducer:
        """A producer of its own (Kafka takes any number); the caller closes it."""
        return KafkaProducer(self._config, self._admin)

    def consumer(self, group: str, *, topics: Sequence[str] = (), pattern: str | None = None,
                 start: StartAt | None = None,
                 backpressure: Backpressure | None = None) -> KafkaConsumer:
        """A new member of Kafka consumer group ``group``; a ``backpressure`` given is
        recorded as the group's policy first (where every process sees it)."""
        if backpressure is not None:
            self._policies.publish(group, backpressure)
        return KafkaConsumer(self._config, group, topics=topics, pattern=pattern, start=start,
                             backpressure=backpressure, fetch_config=self._fetch_config,
                             session_timeout_ms=self._session_timeout_ms)

    def read_to_end(self, topic: str) -> Iterator[Message]:
        """Every message of ``topic`` up to its current end offsets, by assigning its
        partitions (no group, no rebalance to wait for); nothing if it does not exist."""
        return read_to_end({**self._config, **self._fetch_config}, topic)

    def admin(self) -> KafkaAdmin:
        """Topics, watermarks and group offsets."""
        return self._admin

    def topic_reader(self, topic: str, *,
                     partitions: list[int] | None = None) -> KafkaTopicReader:
        """Cursors on ``topic`` outside any group (``cdc log dump``/``tail``); KeyError
        when the topic (or a partition) does not exist. The caller closes it."""
        return KafkaTopicReader({**self._config, **self._fetch_config}, self._admin, topic,
                                partitions=partitions)

    def blocking_lag_exceeded(self) -> bool:
        """True when a group whose recorded policy is ``block`` (by a member in any
        process) lags beyond its bound on a partition. Once this log has a producer (the
        capture's), only the topics it wrote count: other pipelines may share the cluster,
        and a topic the capture does not write cannot fall further behind because of it."""
        blocking = {group: policy.max_lag for group, policy in self._policies.current().items()
                    if policy.policy is BackpressurePolicy.BLOCK}
        written = self._producer.topics if self._producer is not None else None
        return any(lag.lag > bound for group, bound in blocking.items()
                   for lag in self._admin.group_lag(group)
                   if written is None or lag.topic in written)

    def close(self) -> None:
        """Flush the producer; close the clients."""
        if self._producer is not None:
            self._producer.close()
            self._producer = None
        self._policies.close()
