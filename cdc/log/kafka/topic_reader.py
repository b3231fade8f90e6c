"""Reading a whole topic on Kafka without joining a group (``cdc log dump`` and ``tail``).

The same interface and order as the file backend's ``TopicReader``: what a partition
holds is read by assignment, and the partitions are merged in source-position order.
One client reads every chosen partition; a partition whose buffer is full is paused
until the merge has used it, so memory stays bounded whatever the partitions' sizes.
Offsets are asked through the admin client: on the reading client's connection the
request would wait behind a fetch that long-polls the partitions at their end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from cdc.errors import LogError

from ..records import Message
from .admin import KafkaAdmin
from .headers import to_message

BUFFERED_PER_PARTITION = 5000
POLL_S = 0.2
STALL_S = 30.0
"""A partition that should hold more records but gives nothing this long is an error."""


def _merge_key(message: Message) -> tuple[Any, ...]:
    return (message.position, message.partition, message.offset)


class KafkaTopicReader:
    """Cursors on every (or some) partitions of a Kafka topic, outside any group."""

    def __init__(self, config: dict[str, Any], admin: KafkaAdmin, topic: str, *,
                 partitions: list[int] | None = None) -> None:
        self.topic = topic
        self._admin = admin
        marks = self._watermarks(range(admin.partition_count(topic)))
        chosen = sorted(marks) if partitions is None else partitions
        if not marks or any(p not in marks for p in chosen):
            raise KeyError(topic)
        self._consumer = Consumer({**config, "group.id": "distributary-reader",
                                   "enable.auto.commit": False, "enable.partition.eof": True,
                                   "auto.offset.reset": "earliest"})
        self._fetched = {p: marks[p][0] for p in chosen}
        """Per partition: the offset after the last record buffered (or skipped)."""
        self._buffers: dict[int, deque[Message]] = {p: deque() for p in chosen}
        self._paused: set[int] = set()
        self._assign()

    def _watermarks(self, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
        """Low and high watermark of those of ``partitions`` the topic has."""
        wanted = set(partitions)
        return {i.partition: (i.start_offset, i.end_offset)
                for i in self._admin.partitions(self.topic) if i.partition in wanted}

    def _assign(self) -> None:
        self._consumer.assign([KafkaTopicPartition(self.topic, p, offset)
                               for p, offset in self._fetched.items()])
        self._paused.clear()

    def seek(self, where: str | int) -> None:
        """Start at ``earliest``, ``latest`` or an offset (in every chosen partition)."""
        marks = self._watermarks(self._fetched)
        for p in self._fetched:
            low, high = marks[p]
            if where == "earliest":
                self._fetched[p] = low
            elif where == "latest":
                self._fetched[p] = high
            else:
                self._fetched[p] = min(max(int(where), low), high)
            self._buffers[p].clear()
        self._assign()

    def read_available(self, until: int | None = None) -> Iterator[Message]:
        """Everything there now (below ``until`` per partition if given), merged across
        partitions in source-position order."""
        highs = self._admin.end_offsets((self.topic, p) for p in self._fetched)
        ends = {p: highs[self.topic, p] if until is None else min(highs[self.topic, p], until)
                for p in self._fetched}
        yield from self._merge(ends)

    def _merge(self, ends: Mapping[int, int]) -> Iterator[Message]:
        while True:
            waiting = [p for p, end in ends.items()
                       if not self._buffers[p] and self._fetched[p] < end]
            if waiting:
                self._fill(waiting, ends)
                continue
            heads = [buffer[0] for p, buffer in self._buffers.items()
                     if buffer and buffer[0].offset < ends[p]]
            if not heads:
                return
            first = min(heads, key=_merge_key)
            yield self._buffers[first.partition].popleft()

    def _fill(self, waiting: list[int], ends: Mapping[int, int]) -> None:
        """Poll until one of ``waiting`` (partitions with an empty buffer that hold more
        records) got a record or reached its end."""
        idle = 0.0
        while all(not self._buffers[p] and self._fetched[p] < ends[p] for p in waiting):
            self._flow_control()
            if self._poll(POLL_S):
                idle = 0.0
                continue
            idle += POLL_S
            if idle > STALL_S:
                raise LogError(f"reading topic {self.topic}: partitions {waiting} gave "
                               f"nothing for {STALL_S:.0f} s")

    def _poll(self, timeout: float) -> bool:
        """Buffer what one poll returns; True if it returned anything."""
        batch = self._consumer.consume(500, timeout)
        for raw in batch:
            error = raw.error()
            partition = raw.partition() or 0
            offset = raw.offset() or 0
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise LogError(f"reading topic {self.topic}: {error}")
                if partition in self._fetched:  # the end: nothing more below it
                    self._fetched[partition] = max(self._fetched[partition], offset)
                continue
            if partition not in self._buffers or offset < self._fetched[partition]:
                continue
            self._buffers[partition].append(to_message(raw))
            self._fetched[partition] = offset + 1
        return bool(batch)

    def _flow_control(self) -> None:
        """Pause partitions with a full buffer, resume those the merge has drained."""
        full = {p for p, buffer in self._buffers.items() if len(buffer) >= BUFFERED_PER_PARTITION}
        if full - self._paused:
            self._consumer.pause([KafkaTopicPartition(self.topic, p)
                                  for p in full - self._paused])
        if self._paused - full:
            self._consumer.resume([KafkaTopicPartition(self.topic, p)
                                   for p in self._paused - full])
        self._paused = full

    def follow(self, wait_s: float = 1.0) -> Iterator[Message]:
        """Everything there now, then new records as they arrive (until interrupted)."""
        while True:
            yield from self.read_available()
            self._flow_control()
            self._poll(wait_s)  # blocks until a record arrives (or ``wait_s``)

    def close(self) -> None:
        """Close the client."""
        self._consumer.close()
