"""Reading partitions of a topic up to their end, by assignment (no consumer group).

Start-up state (slot ownership, snapshot progress, schema versions) and the last
position of each partition are read this way: a group subscription would first have to
wait for a rebalance, and a poll that returns nothing meanwhile looks like an empty topic.
A partition is done when the client reports its end (``enable.partition.eof``), which
also steps over transaction markers and offsets removed by compaction.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from cdc.errors import LogError

from ..records import NO_POSITION, Message, Position
from .headers import to_message
from .retry import retrying

TIMEOUT_S = 30.0
POLL_S = 0.2
LAST_WINDOW = 16
"""Records read back from the end of a partition to find its last position."""


def _reader(config: dict[str, Any]) -> Any:
    return Consumer({**config, "group.id": "distributary-reader",
                     "enable.auto.commit": False, "enable.partition.eof": True,
                     "auto.offset.reset": "earliest",
                     "fetch.wait.max.ms": 10})  # reads what is there: no long-poll


def watermarks(reader: Any, topic: str) -> dict[int, tuple[int, int]]:
    """Low and high watermark of each partition of ``topic`` (empty if it does not exist)."""
    try:
        meta = reader.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        if meta is None or meta.error is not None:
            return {}
        found = {}
        for partition in sorted(meta.partitions):
            low, high = retrying(partial(reader.get_watermark_offsets,
                                         KafkaTopicPartition(topic, partition),
                                         timeout=TIMEOUT_S))
            found[partition] = (int(low), int(high))
        return found
    except KafkaException as exc:
        raise LogError(f"cannot read the offsets of topic {topic}: {exc}") from exc


def _read_from(reader: Any, topic: str, starts: Mapping[int, int],
               ends: Mapping[int, int]) -> Iterator[Message]:
    """Messages of ``topic`` from ``starts`` until each partition reached its end."""
    pending = {p for p, start in starts.items() if start < ends[p]}
    if not pending:
        return
    reader.assign([KafkaTopicPartition(topic, p, starts[p]) for p in sorted(pending)])
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while pending:
            if time.monotonic() > deadline:
                raise LogError(f"reading topic {topic} to its end: partitions "
                               f"{sorted(pending)} gave nothing for {TIMEOUT_S:.0f} s")
            raw = reader.poll(POLL_S)  # returns as soon as a record or the end is there
            if raw is None:
                continue
            deadline = time.monotonic() + TIMEOUT_S
            error = raw.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise LogError(f"reading topic {topic}: {error}")
                pending.discard(raw.partition())
                continue
            if raw.offset() >= ends[raw.partition()] - 1:
                pending.discard(raw.partition())
            yield to_message(raw)
    finally:
        reader.unassign()


def read_to_end(config: dict[str, Any], topic: str) -> Iterator[Message]:
    """Every message of ``topic`` up to the end offsets it had when called, in offset order
    per partition; nothing if the topic does not exist."""
    reader = _reader(config)
    try:
        marks = watermarks(reader, topic)
        yield from _read_from(reader, topic, {p: low for p, (low, _) in marks.items()},
                              {p: high for p, (_, high) in marks.items()})
    finally:
        reader.close()


class TailReader:
    """Reads the last position of partitions, reusing one unassigned client (the capture
    asks once per topic it touches after a restart: thousands of topics must stay cheap)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._reader = _reader(config)

    def last_positions(self, topic: str) -> dict[int, Position]:
        """The source position of the last record of each partition of ``topic``.

        Reads a window before each end, widening it when the window held no record (only
        transaction markers, or offsets compacted away).
        """
        marks = watermarks(self._reader, topic)
        positions = {p: NO_POSITION for p in marks}
        window = LAST_WINDOW
        unresolved = {p for p, (low, high) in marks.items() if high > low}
        while unresolved:
            starts = {p: max(marks[p][0], marks[p][1] - window) for p in unresolved}
            found: dict[int, Position] = {}
            for message in _read_from(self._reader, topic, starts,
                                      {p: marks[p][1] for p in unresolved}):
                found[message.partition] = message.position
            positions.update(found)
            unresolved = {p for p in unresolved
                          if p not in found and starts[p] > marks[p][0]}
            window *= 16
        return positions

    def close(self) -> None:
        """Close the client."""
        self._reader.close()
