"""After a crash, skip what the log already holds (invariant 2: nothing duplicated).

PostgreSQL resends from the slot's confirmed position; every record whose source
position is at or before the last durable position of *its* partition is already in the
log. A topic's last positions are read the first time a record of that topic is checked
(from the partitions' tails, no file kept open), so start-up costs nothing per topic and a
resent transaction pays only for the topics it touches. Past a topic's highest position
its records need no per-partition check.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cdc.log import NO_POSITION, Position, Producer, Record, partition_for


class ResumeFilter:
    """Drops records the log already holds, partition by partition."""

    def __init__(self, producer: Producer, topics: Iterable[str]) -> None:
        self._producer = producer
        self._unread = set(topics)  # existing topics whose positions are not read yet
        self._positions: dict[str, dict[int, Position]] = {}
        self._highest: dict[str, Position] = {}

    def fresh(self, records: Sequence[Record]) -> Sequence[Record]:
        """``records`` less those already durable in the log."""
        if not records:
            return records
        highest = self._highest
        for record in records:  # the common case, inline: every record is past its topic's end
            end = highest.get(record.topic)
            if end is None or not (record.position > end or record.position == NO_POSITION):
                break
        else:
            return records
        if all(self._past_topic_end(r) for r in records):
            return records
        return [r for r in records if self._is_new(r)]

    def _past_topic_end(self, record: Record) -> bool:
        highest = self._highest.get(record.topic)
        if highest is None:
            if record.topic not in self._unread:
                # a topic created after start-up: nothing of it is old
                self._highest[record.topic] = NO_POSITION
                return True
            self._load(record.topic)
            highest = self._highest[record.topic]
        return record.position > highest or record.position == NO_POSITION

    def _load(self, topic: str) -> None:
        self._unread.discard(topic)
        positions = self._producer.last_positions(topic)
        self._positions[topic] = positions
        self._highest[topic] = max(positions.values(), default=NO_POSITION)

    def _is_new(self, record: Record) -> bool:
        if self._past_topic_end(record):
            return True
        positions = self._positions.get(record.topic)
        if not positions:
            return True
        last: Position = positions[partition_for(record.key, len(positions))]
        return record.position > last
