"""``FileTopicProducer``: appends to one topic beside the capture's producer.

A connector writes its dead-letter topic from its own process while the capture holds
the log's ``.writer.lock``. This producer takes only the topic's writer lock, and only
around each append; since another process may have appended in between, it reopens
(recovers) a partition's writer whenever the segment on disk is not the one it left.
Dead letters are rare, so the lock and the occasional recovery cost nothing that matters.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cdc.errors import LogError

from ..partitioner import partition_for
from ..records import Position, Record, TopicPartition
from .housekeeping import Housekeeping
from .notify import doorbell_name, ring
from .topic_lock import TopicLock
from .topics import TopicMeta, last_record, partition_dir, read_meta, write_meta
from .writer import PartitionWriter

if TYPE_CHECKING:
    from .directory import LogDirectory

LOCK_TIMEOUT_S = 30.0


class FileTopicProducer:
    """A producer restricted to ``topic``; safe beside other writers of the same log."""

    def __init__(self, log: LogDirectory, topic: str, *,
                 lock_timeout: float = LOCK_TIMEOUT_S) -> None:
        self._log = log
        self.topic = topic
        self._lock = TopicLock(log.root, topic)
        self._lock_timeout = lock_timeout
        self._writers: dict[int, PartitionWriter] = {}
        self._housekeeping = Housekeeping(log.root, log.settings, compaction=False)

    def _partition_count(self) -> int:
        meta = read_meta(self._log.root, self.topic)
        if meta is None:
            meta = TopicMeta(self._log.settings.default_partitions)
            write_meta(self._log.root, self.topic, meta)
        return meta.partitions

    def _writer(self, partition: int) -> PartitionWriter:
        writer = self._writers.get(partition)
        if writer is not None and writer.matches_disk():
            return writer
        if writer is not None:
            writer.close()
        settings = self._log.settings
        writer = PartitionWriter(partition_dir(self._log.root, self.topic, partition),
                                 self.topic, partition, segment_bytes=settings.segment_bytes,
                                 segment_ms=settings.segment_ms, fsync=settings.fsync,
                                 pool=self._log.handles)
        self._writers[partition] = writer
        return writer

    def append(self, records: Sequence[Record]) -> None:
        """Append ``records`` (all of ``topic``); durable on return."""
        stray = {r.topic for r in records} - {self.topic}
        if stray:
            raise LogError(f"this producer writes only {self.topic!r}, not {sorted(stray)}")
        self._lock.acquire(self._lock_timeout)
        try:
            count = self._partition_count()
            batches: dict[int, list[Record]] = {}
            for record in records:
                partition = record.partition
                if partition is None:
                    partition = partition_for(record.key, count) if count > 1 else 0
                elif not 0 <= partition < count:
                    raise LogError(f"partition {partition} out of range for topic "
                                   f"{self.topic!r} with {count} partitions")
                batches.setdefault(partition, []).append(record)
            now_ms = int(time.time() * 1000)
            for partition, batch in batches.items():
                self._writer(partition).append(batch, now_ms)
                ring(self._log.root, doorbell_name(self.topic, partition))
            self._housekeeping.after_append(
                {TopicPartition(self.topic, p): w for p, w in self._writers.items()})
        finally:
            self._lock.release()

    def last_positions(self, topic: str) -> dict[int, Position]:
        """The source position of the last record of each partition of ``topic``."""
        meta = read_meta(self._log.root, topic)
        if meta is None:
            return {}
        found: dict[int, Position] = {}
        for partition in range(meta.partitions):
            last = last_record(self._log.root, topic, partition)
            found[partition] = last.position if last is not None else Position(0, 0)
        return found

    def claim(self) -> None:
        """Nothing to do: one topic's producer never competes with a capture."""

    def close(self) -> None:
        """Close the partition files."""
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        self._lock.release()
