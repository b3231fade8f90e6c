"""``FileLog``: the embedded default backend, a directory of topics on local disk."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from ..records import (
    Backpressure,
    BackpressurePolicy,
    GroupLag,
    Message,
    PartitionInfo,
    StartAt,
    TopicPartition,
)
from .consumer import FileConsumer
from .directory import FileLogSettings
from .groups import read_policy
from .handles import HandlePool
from .offsets import OffsetStore
from .producer import FileProducer
from .read_to_end import read_to_end
from .topic_producer import FileTopicProducer
from .topics import (
    TopicMeta,
    end_offset,
    list_topics,
    partition_size,
    read_meta,
    start_offset,
    write_meta,
)


class FileLog:
    """A log in a directory: ``<root>/<topic dir>/partition=<p>/<segment>.jsonl`` (the
    topic's directory name: ``names.topic_dir_name``). Its writers and readers share one
    bounded pool of open files (``settings.open_files``)."""

    def __init__(self, root: Path | str, settings: FileLogSettings | None = None) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.settings = settings or FileLogSettings()
        self.handles = HandlePool(self.settings.open_files)
        self._producer: FileProducer | None = None

    @property
    def default_partitions(self) -> int:
        return self.settings.default_partitions

    def producer(self, writer_id: str | None = None) -> FileProducer:
        """This handle's producer (created on first call; holds the writer lock, which
        keeps any other out: ``writer_id`` is not needed)."""
        if self._producer is None:
            self._producer = FileProducer(self)
        return self._producer

    def consumer(self, group: str, *, topics: Sequence[str] = (), pattern: str | None = None,
                 start: StartAt | None = None,
                 backpressure: Backpressure | None = None) -> FileConsumer:
        """A new member of ``group``."""
        return FileConsumer(self, group, topics=topics, pattern=pattern, start=start,
                            backpressure=backpressure)

    def admin(self) -> FileAdmin:
        """Topics, offsets, groups."""
        return FileAdmin(self)

    def blocking_lag_exceeded(self) -> bool:
        """True when a group with policy ``block`` lags more than its bound somewhere."""
        admin = self.admin()
        for group in admin.groups():
            policy = read_policy(self.root, group)
            if policy.policy is not BackpressurePolicy.BLOCK:
                continue
            if any(lag.lag > policy.max_lag for lag in admin.group_lag(group)):
                return True
        return False

    def read_to_end(self, topic: str) -> Iterator[Message]:
        """Every message of ``topic`` up to its current end offsets (no group)."""
        return read_to_end(self.root, topic)

    def topic_producer(self, topic: str) -> FileTopicProducer:
        """A producer of ``topic`` alone that may run beside the capture's producer, in
        any process (a connector's dead-letter topic); the caller closes it."""
        return FileTopicProducer(self, topic)

    def _end_offset(self, tp: TopicPartition) -> int:
        known = self._producer.known_end_offset(tp) if self._producer is not None else None
        return known if known is not None else end_offset(self.root, tp.topic, tp.partition)

    def close(self) -> None:
        """Close the producer if one was opened."""
        if self._producer is not None:
            self._producer.close()
            self._producer = None


class FileAdmin:
    """Administration of a file log."""

    def __init__(self, log: FileLog) -> None:
        self._log = log
        self._root = log.root

    def create_topic(self, topic: str, partitions: int | None = None,
                     *, compacted: bool = False) -> None:
        """Create ``topic``; an existing one must have the same partition count."""
        count = partitions or self._log.default_partitions
        existing = read_meta(self._root, topic)
        if existing is not None:
            if existing.partitions != count:
                from cdc.errors import LogError
                raise LogError(f"topic {topic!r} exists with {existing.partitions} "
                               f"partitions, not {count}")
            return
        write_meta(self._root, topic, TopicMeta(count, compacted))

    def create_topics(self, topics: Sequence[str], partitions: int | None = None) -> None:
        """Create every topic of ``topics`` that does not exist."""
        for topic in topics:
            self.create_topic(topic, partitions)

    def topics(self) -> list[str]:
        """Every topic, sorted."""
        return list_topics(self._root)

    def partitions(self, topic: str) -> list[PartitionInfo]:
        """Offsets and size of each partition."""
        meta = read_meta(self._root, topic)
        if meta is None:
            return []
        return [PartitionInfo(topic, p, start_offset(self._root, topic, p),
                              self._log._end_offset(TopicPartition(topic, p)),
                              partition_size(self._root, topic, p))
                for p in range(meta.partitions)]

    def groups(self) -> list[str]:
        """Every consumer group known to this log."""
        directory = self._root / "_groups"
        return sorted(p.name for p in directory.iterdir()) if directory.exists() else []

    def group_lag(self, group: str) -> list[GroupLag]:
        """Committed offset and lag of ``group`` on every partition of the topics it read."""
        committed = OffsetStore(self._root, group).all()
        return [GroupLag(group, tp.topic, tp.partition, offset, self._log._end_offset(tp))
                for tp, offset in sorted(committed.items(),
                                         key=lambda kv: (kv[0].topic, kv[0].partition))]
