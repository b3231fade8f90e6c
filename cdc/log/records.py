"""What flows through the log: records appended, messages read, positions, partitions."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

__all__ = [
    "NO_POSITION",
    "Backpressure",
    "BackpressurePolicy",
    "GroupLag",
    "Message",
    "PartitionInfo",
    "Position",
    "Record",
    "StartAt",
    "StartKind",
    "TopicPartition",
]


class Position(NamedTuple):
    """A source position ``(commit_lsn, seq)``; strictly increasing in commit order."""

    commit_lsn: int
    seq: int


NO_POSITION = Position(0, 0)


class TopicPartition(NamedTuple):
    """One partition of one topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


class Record(NamedTuple):
    """One record to append: key and value are already-encoded JSON bytes.

    ``tombstone`` marks a delete: compaction keeps it for the configured time, then
    drops the key. ``partition`` overrides the key hash when set.
    """

    topic: str
    key: bytes
    value: bytes
    position: Position = NO_POSITION
    tombstone: bool = False
    timestamp_ms: int | None = None
    partition: int | None = None


class Message(NamedTuple):
    """One record as read back from the log, with where it is."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes
    value: bytes
    position: Position
    tombstone: bool


class StartKind(Enum):
    """Where a consumer without a committed offset (or asked to) begins."""

    COMMITTED = "committed"
    EARLIEST = "earliest"
    LATEST = "latest"
    TIMESTAMP = "timestamp"
    POSITION = "position"


@dataclass(frozen=True, slots=True)
class StartAt:
    """A start point: the group's committed offset (falling back to ``fallback``), the
    earliest or latest offset, the first record at or after a time (ms) or a source LSN."""

    kind: StartKind = StartKind.COMMITTED
    timestamp_ms: int = 0
    commit_lsn: int = 0
    fallback: StartKind = StartKind.EARLIEST

    @classmethod
    def committed(cls, fallback: StartKind = StartKind.EARLIEST) -> StartAt:
        return cls(StartKind.COMMITTED, fallback=fallback)

    @classmethod
    def earliest(cls) -> StartAt:
        return cls(StartKind.EARLIEST)

    @classmethod
    def latest(cls) -> StartAt:
        return cls(StartKind.LATEST)

    @classmethod
    def at_time(cls, timestamp_ms: int) -> StartAt:
        return cls(StartKind.TIMESTAMP, timestamp_ms=timestamp_ms)

    @classmethod
    def at_lsn(cls, commit_lsn: int) -> StartAt:
        return cls(StartKind.POSITION, commit_lsn=commit_lsn)


class BackpressurePolicy(Enum):
    """What a consumer group does when it falls behind (docs/architecture.md, Backpressure)."""

    BUFFER = "buffer"
    DROP = "drop"
    BLOCK = "block"


@dataclass(frozen=True, slots=True)
class Backpressure:
    """A group's policy and, for ``drop`` and ``block``, the lag bound in records."""

    policy: BackpressurePolicy = BackpressurePolicy.BUFFER
    max_lag: int = 0


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """Offsets of one partition: first still retained, next to be written, bytes on disk."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    size_bytes: int


@dataclass(frozen=True, slots=True)
class GroupLag:
    """A consumer group's committed offset and lag on one partition."""

    group: str
    topic: str
    partition: int
    committed: int | None
    end_offset: int

    @property
    def lag(self) -> int:
        return self.end_offset - (self.committed or 0)
