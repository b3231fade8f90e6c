"""The log's contract: one interface, two backends (``file`` and ``kafka``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from .records import (
    Backpressure,
    GroupLag,
    Message,
    PartitionInfo,
    Position,
    Record,
    StartAt,
    TopicPartition,
)


class Producer(Protocol):
    """Appends batches durably, in order per partition."""

    def append(self, records: Sequence[Record]) -> None:
        """Append ``records``; when this returns every one of them is durable."""

    def last_positions(self, topic: str) -> dict[int, Position]:
        """The source position of the last durable record of each partition of ``topic``."""

    def claim(self) -> None:
        """Become the log's only writer before appending (a capture that takes over): a
        producer with the same identity written before is fenced, its unfinished batch
        discarded. The file log's producer is the only writer from its creation on."""

    def close(self) -> None:
        """Release the producer (flushing anything pending)."""


class Consumer(Protocol):
    """Reads the partitions assigned to it, in offset order per partition."""

    def poll(self, max_records: int = 1000, timeout: float = 1.0) -> list[Message]:
        """The next records, waiting up to ``timeout`` s for new ones (no busy polling)."""

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit the next offset to read per partition (default: after what was polled)."""

    def assignment(self) -> set[TopicPartition]:
        """The partitions this member reads now."""

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Read ``partition`` from ``offset`` on."""

    def close(self) -> None:
        """Leave the group (its partitions go to the other members)."""


class Admin(Protocol):
    """Topics, partitions, offsets and lag."""

    def create_topic(self, topic: str, partitions: int | None = None) -> None:
        """Create ``topic`` (idempotent when it exists with the same partition count)."""

    def create_topics(self, topics: Sequence[str], partitions: int | None = None) -> None:
        """Create every topic of ``topics`` that does not exist (Kafka: one request per
        batch of topics, not one per topic)."""

    def topics(self) -> list[str]:
        """Every topic, sorted."""

    def partitions(self, topic: str) -> list[PartitionInfo]:
        """Offsets and size of each partition of ``topic``."""

    def group_lag(self, group: str) -> list[GroupLag]:
        """Committed offset and lag of ``group`` on each partition it has committed."""

    def groups(self) -> list[str]:
        """Every consumer group that has committed offsets."""


class Log(Protocol):
    """A log backend: hands out producers, consumers and an admin."""

    def producer(self, writer_id: str | None = None) -> Producer:
        """The producer (one per log: the capture's). ``writer_id``: the capture's
        identity, the same for every replica of one pipeline; on Kafka its transactional
        id, so that ``Producer.claim`` fences an earlier producer with it."""

    def topic_producer(self, topic: str) -> Producer:
        """A producer of ``topic`` alone, usable beside ``producer()`` from any process
        (a connector's dead-letter topic); the caller closes it."""

    def consumer(self, group: str, *, topics: Sequence[str] = (), pattern: str | None = None,
                 start: StartAt | None = None,
                 backpressure: Backpressure | None = None) -> Consumer:
        """A member of consumer group ``group`` reading ``topics`` or topics matching
        ``pattern``."""

    def admin(self) -> Admin:
        """Administration of topics and groups."""

    def read_to_end(self, topic: str) -> Iterator[Message]:
        """Every message of ``topic`` up to the end offsets it has when called, in offset
        order per partition, read by assigning its partitions (no group, so no rebalance
        to wait for and no early empty poll); nothing if the topic does not exist."""

    def blocking_lag_exceeded(self) -> bool:
        """True when a group with the ``block`` policy lags beyond its bound."""

    def close(self) -> None:
        """Release everything this log handle opened."""
