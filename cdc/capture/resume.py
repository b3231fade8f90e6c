"""After a crash, skip what the log already holds (invariant 2: nothing duplicated).

PostgreSQL resends from the slot's confirmed position; every record whose source
position is at or before the last durable position of *its* partition is already in the
log. Past the highest of those positions nothing needs checking.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cdc.log import NO_POSITION, Position, Producer, Record, partition_for


class ResumeFilter:
    """Drops records the log already holds, partition by partition."""

    def __init__(self, producer: Producer, topics: Iterable[str]) -> None:
        self._positions = {t: producer.last_positions(t) for t in topics}
        self.floor = max((p for ps in self._positions.values() for p in ps.values()),
                         default=NO_POSITION)

    def fresh(self, records: Sequence[Record]) -> Sequence[Record]:
        """``records`` less those already durable in the log."""
        if not records or records[0].position > self.floor:
            return records
        return [r for r in records if self._is_new(r)]

    def _is_new(self, record: Record) -> bool:
        if record.position > self.floor or record.position == NO_POSITION:
            return True
        positions = self._positions.get(record.topic)
        if not positions:
            return True
        last: Position = positions[partition_for(record.key, len(positions))]
        return record.position > last
