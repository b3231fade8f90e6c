"""The resume filter: drops what the log holds, reading last positions only of the topics
that resent records touch."""

from __future__ import annotations

from collections.abc import Sequence

from cdc.capture.stream.resume import ResumeFilter
from cdc.log import NO_POSITION, Position, Record, partition_for


class PositionsLog:
    """A producer that knows each topic's last positions and counts who asked."""

    def __init__(self, positions: dict[str, dict[int, Position]]) -> None:
        self.positions = positions
        self.asked: list[str] = []

    def append(self, records: Sequence[Record]) -> None:
        raise AssertionError("the filter never appends")

    def last_positions(self, topic: str) -> dict[int, Position]:
        self.asked.append(topic)
        return self.positions.get(topic, {})

    def claim(self) -> None:
        raise AssertionError("the filter never claims the log")

    def close(self) -> None:
        pass


def record(topic: str, key: int, lsn: int) -> Record:
    return Record(topic, b'{"id":%d}' % key, b"{}", Position(lsn, 0))


def key_in(partition: int, partitions: int = 3) -> int:
    return next(k for k in range(1000)
                if partition_for(b'{"id":%d}' % k, partitions) == partition)


def test_start_up_reads_no_topic() -> None:
    log = PositionsLog({f"t{i}": {0: Position(10, 0)} for i in range(2000)})
    ResumeFilter(log, list(log.positions))
    assert log.asked == []


def test_only_the_touched_topics_are_read_once() -> None:
    log = PositionsLog({"a": {0: Position(50, 0), 1: Position(80, 0), 2: NO_POSITION},
                        "b": {0: Position(90, 0), 1: NO_POSITION, 2: NO_POSITION}})
    resume = ResumeFilter(log, ["a", "b", "c"])
    old_a = record("a", key_in(1), 70)   # at or before a[1]'s last: already in the log
    new_a = record("a", key_in(0), 70)   # after a[0]'s last (50): new
    assert resume.fresh([old_a, new_a]) == [new_a]
    assert resume.fresh([record("a", key_in(2), 60)]) != []
    assert log.asked == ["a"]
    late = record("b", key_in(0), 95)
    assert resume.fresh([late]) == [late]
    assert log.asked == ["a", "b"]


def test_topics_created_after_start_up_are_all_new() -> None:
    log = PositionsLog({})
    resume = ResumeFilter(log, [])
    batch = [record("new", 1, 5)]
    assert resume.fresh(batch) == batch
    assert log.asked == []
