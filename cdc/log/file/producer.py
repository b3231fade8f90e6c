"""The file log's producer: the one process that appends (it holds the writer lock).

``append`` groups a batch's records per partition (natively when it can), writes each
partition's lines to its segment, then makes the batch durable (``durability``: the
batch journal, or the segments' own fdatasyncs), rings the doorbells of the partitions
written (``notify``) and lets retention and compaction run when due (``housekeeping``).

Besides the log-wide writer lock (``log_lock``: one capture per log), it takes the writer
lock of each topic it writes (``topic_lock``), so a connector's ``FileTopicProducer`` may
append to its own dead-letter topic from another process, never to a topic the capture
writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

from cdc.crashpoints import crash_point
from cdc.errors import LogError
from cdc.native import CORE

from ..partitioner import partition_for
from ..records import NO_POSITION, Position, Record, TopicPartition
from .durability import Durability, JournalPart
from .encoded import EncodedPart, EncodedRows
from .housekeeping import Housekeeping
from .log_lock import LogWriterLock
from .names import migrate_case_dirs
from .notify import TOPICS_BELL, doorbell_path, ring, ring_path
from .topic_lock import TopicLock, topic_locks
from .topics import TopicMeta, end_offset, last_record, partition_dir, read_meta, write_meta
from .writer import PartitionWriter, fsync_dir, sync_file

if TYPE_CHECKING:
    from .directory import LogDirectory


class FileProducer:
    """Appends batches; every batch is durable (one fdatasync: the journal's, or the
    segment's for a batch of one partition) when ``append`` returns. Only one producer
    may write to a log directory at a time."""

    def __init__(self, log: LogDirectory) -> None:
        self._log = log
        self._log_lock = LogWriterLock(log.root)
        if migrate_case_dirs(log.root):
            fsync_dir(log.root)
            ring(log.root, TOPICS_BELL)
        self._writers: dict[TopicPartition, PartitionWriter] = {}
        self._bells: dict[TopicPartition, str] = {}
        self._topic_bytes: dict[str, bytes] = {}
        self._idle_ends: dict[TopicPartition, int] = {}  # held topics' unwritten partitions
        self._partitions: dict[str, int] = {}
        self._lock_table = topic_locks(log.root)
        self._topic_locks: dict[str, TopicLock] = {}
        self._housekeeping = Housekeeping(log.root, log.settings)
        # partitions written by ``append_encoded(durable=False)`` whose sync has not ended
        # yet (a count per partition), kept by whichever thread runs the sync
        self._unsynced: dict[tuple[str, int], int] = {}
        self._unsynced_lock = threading.Lock()
        self._durability = Durability(log.root, log.settings.fsync, self.writer,
                                      lambda topic: read_meta(log.root, topic) is not None,
                                      checkpoint_bytes=log.settings.checkpoint_bytes)

    def _hold_topic(self, topic: str) -> None:
        if topic in self._topic_locks:
            return
        lock = TopicLock(self._log.root, topic, self._lock_table)
        if not lock.try_acquire():
            raise LogError(f"topic {topic!r} is being written by another producer "
                           f"(lock {lock.path}); the capture cannot write it")
        self._topic_locks[topic] = lock

    def _partition_count(self, topic: str) -> int:
        count = self._partitions.get(topic)
        if count is None:
            self._hold_topic(topic)
            meta = read_meta(self._log.root, topic)
            if meta is None:
                meta = TopicMeta(self._log.settings.default_partitions)
                write_meta(self._log.root, topic, meta)
            count = self._partitions[topic] = meta.partitions
        return count

    def writer(self, tp: TopicPartition) -> PartitionWriter:
        """The writer of one partition (recovered from disk on first use)."""
        writer = self._writers.get(tp)
        if writer is None:
            self._hold_topic(tp.topic)
            settings = self._log.settings
            writer = PartitionWriter(partition_dir(self._log.root, tp.topic, tp.partition),
                                     tp.topic, tp.partition,
                                     segment_bytes=settings.segment_bytes,
                                     segment_ms=settings.segment_ms, fsync=settings.fsync,
                                     pool=self._log.handles, journaled=settings.fsync)
            self._writers[tp] = writer
            self._idle_ends.pop(tp, None)
            self._bells[tp] = doorbell_path(self._log.root, tp.topic, tp.partition)
        return writer

    def append(self, records: Sequence[Record]) -> None:
        """Append ``records`` (grouped per partition, order kept); durable on return."""
        if type(records) is list and records and self._append_whole(records):
            return
        batches: dict[tuple[str, int], list[Record]] | None = None
        if type(records) is list:  # None: a topic not seen yet, ``_group`` learns its count
            batches = CORE.group_records(records, self._partitions)
        if batches is None:
            batches = self._group(records)
        self._write(batches)

    def _append_whole(self, records: list[Record]) -> bool:
        """The common batch, every record of one topic of one partition (none with a
        partition of its own), checked and encoded in one native pass (what ``_group`` then
        ``_write`` do with it); False, and nothing written, when it is not one."""
        topic = getattr(records[0], "topic", None)
        if type(topic) is not str or self._partitions.get(topic) != 1:
            return False
        key = (topic, 0)
        writers = cast("dict[tuple[str, int], PartitionWriter]", self._writers)
        writer = writers.get(key) or self.writer(TopicPartition(topic, 0))
        # durable by the segment's own fdatasync, as ``_write`` makes a one-partition batch
        if writer.write_topic(records, topic, int(time.time() * 1000),
                              sync=self._durability.syncs) is None:
            return False
        self._made_durable([], [], (key,))
        return True

    def _group(self, records: Sequence[Record]) -> dict[tuple[str, int], list[Record]]:
        """``records`` per partition, in order of first appearance, order kept (what the
        native core's ``group_records`` does too, once every topic's count is known)."""
        batches: dict[tuple[str, int], list[Record]] = {}  # plain tuples: cheaper keys
        counts = self._partitions
        for record in records:
            topic = record.topic
            count = counts.get(topic) or self._partition_count(topic)
            partition = record.partition
            if partition is None:
                partition = partition_for(record.key, count) if count > 1 else 0
            elif not 0 <= partition < count:
                raise LogError(f"partition {partition} out of range for topic "
                               f"{topic!r} with {count} partitions")
            batch = batches.get((topic, partition))
            if batch is None:
                batches[topic, partition] = [record]
            else:
                batch.append(record)
        return batches

    def _write(self, batches: Mapping[tuple[str, int],
                                      list[Record] | list[list[Record] | EncodedPart]]
               ) -> None:
        """Write each partition's records (or its pieces, in order: runs of records and
        ``EncodedPart``s of ``append_encoded``), then make the batch durable."""
        now_ms = int(time.time() * 1000)
        # one partition: its segment is fdatasynced as it is written (it then holds the
        # batch and everything written to it before durably); else ``durability``
        direct = self._durability.syncs and len(batches) == 1
        journaled = self._durability.syncs and not direct
        if journaled:
            self._sync_unsynced(batches)
        parts: list[JournalPart] = []
        written: list[PartitionWriter] = []
        # a TopicPartition hashes and compares like its plain tuple: look up with either
        writers = cast("dict[tuple[str, int], PartitionWriter]", self._writers)
        for i, (key, batch) in enumerate(batches.items()):
            if i:
                crash_point("mid_append")
            writer = writers.get(key) or self.writer(TopicPartition(*key))
            if batch and not isinstance(batch[0], Record):
                first, data = self._write_pieces(writer, batch, now_ms, sync=direct)
            else:
                first, data = writer.write(cast("list[Record]", batch), now_ms, sync=direct)
            if journaled:
                parts.append((self._topic_name(key[0]), key[1], first, data))
                written.append(writer)
        self._made_durable(parts, written, batches)

    @staticmethod
    def _write_pieces(writer: PartitionWriter, pieces: list[list[Record] | EncodedPart],
                      now_ms: int, *, sync: bool) -> tuple[int, bytes]:
        """Write the pieces in order (the last one with ``sync``: the segment then holds
        them all durably)."""
        first = -1
        datas = []
        last = len(pieces) - 1
        for i, piece in enumerate(pieces):
            at, data = (writer.write(piece, now_ms, sync=sync and i == last)
                        if isinstance(piece, list)
                        else writer.write_encoded(piece, now_ms, sync=sync and i == last))
            first = at if first < 0 else first
            datas.append(data)
        return first, datas[0] if len(datas) == 1 else b"".join(datas)

    def _topic_name(self, topic: str) -> bytes:
        """``topic`` in UTF-8 as journal parts name it (kept: asked once per partition)."""
        name = self._topic_bytes.get(topic)
        if name is None:
            name = self._topic_bytes[topic] = topic.encode()
        return name

    def _made_durable(self, parts: list[JournalPart], written: list[PartitionWriter],
                      keys: Iterable[tuple[str, int]]) -> None:
        """After a batch's lines went to their segments: durable (``durability``; no
        ``parts`` when the segment was synced itself), the consumers' doorbells, then
        housekeeping."""
        self._durability.commit(parts, written)
        bells = cast("dict[tuple[str, int], str]", self._bells)
        for key in keys:  # durable now: wake the consumers of these partitions only
            ring_path(bells[key])
        self._durability.checkpoint()
        self._housekeeping.after_append(self._writers)

    def append_encoded(self, parts: Sequence[list[Record] | EncodedRows], *,
                       durable: bool = True) -> Callable[[], None] | None:
        """Append ``parts`` in order as one batch, durable on return (one journal
        fdatasync): runs of records, and rows grouped and encoded by their own code
        (``EncodedRows``), which become the lines ``append`` would write for the records
        they stand for. Each partition gets its rows in order, and one journal part.

        With ``durable=False`` the lines are only written: the function returned makes
        them durable (fdatasyncs of their segments, by name: any thread may call it
        while this one appends on) and then wakes their consumers. A durable append to
        one of those partitions before that function returned syncs them first, so the
        journal never holds lines past a lost tail."""
        groups: dict[tuple[str, int], list[list[Record] | EncodedPart]] = {}
        for part in parts:
            if isinstance(part, list):
                for key, batch in self._group(part).items():
                    groups.setdefault(key, []).append(batch)
            else:
                topic = part.topic
                for piece in part.parts(self._partition_count(topic)):
                    groups.setdefault((topic, piece.partition), []).append(piece)
        if durable or not self._durability.syncs:
            self._write(groups)
            return None
        return self._write_unsynced(groups)

    def _write_unsynced(self, batches: Mapping[tuple[str, int], list[list[Record] | EncodedPart]]
                        ) -> Callable[[], None]:
        """Write each partition's pieces into the page cache; the function that makes
        them durable (``append_encoded``). A segment rolled over meanwhile was synced by
        the rollover: the lines' tail is in each writer's active segment."""
        now_ms = int(time.time() * 1000)
        writers = cast("dict[tuple[str, int], PartitionWriter]", self._writers)
        paths: list[str] = []
        for i, (key, batch) in enumerate(batches.items()):
            if i:
                crash_point("mid_append")
            writer = writers.get(key) or self.writer(TopicPartition(*key))
            self._write_pieces(writer, batch, now_ms, sync=False)
            paths.append(writer.segment_path)
        keys = list(batches)
        with self._unsynced_lock:
            for key in keys:
                self._unsynced[key] = self._unsynced.get(key, 0) + 1
        bells = cast("dict[tuple[str, int], str]", self._bells)
        rings = [bells[key] for key in keys]

        def made_durable() -> None:
            for path in paths:
                sync_file(path)
            with self._unsynced_lock:
                for key in keys:
                    left = self._unsynced[key] - 1
                    if left:
                        self._unsynced[key] = left
                    else:
                        del self._unsynced[key]
            for bell in rings:
                ring_path(bell)

        return made_durable

    def _sync_unsynced(self, keys: Iterable[tuple[str, int]]) -> None:
        """Sync the active segments of ``keys`` written by ``append_encoded(durable=False)``
        whose sync has not ended (before the journal holds more of them)."""
        if not self._unsynced:
            return
        with self._unsynced_lock:
            pending = [key for key in keys if key in self._unsynced]
        writers = cast("dict[tuple[str, int], PartitionWriter]", self._writers)
        for key in pending:
            sync_file(writers[key].segment_path)

    def end_offset(self, tp: TopicPartition) -> int:
        """The next offset of a partition as this producer knows it."""
        return self.writer(tp).next_offset

    def known_end_offset(self, tp: TopicPartition) -> int | None:
        """The next offset of a partition of a topic this producer writes (read from disk
        once, then kept: nobody else may append to it), else None."""
        writer = self._writers.get(tp)
        if writer is not None:
            return writer.next_offset
        if tp.topic not in self._topic_locks:
            return None
        end = self._idle_ends.get(tp)
        if end is None:
            end = self._idle_ends[tp] = end_offset(self._log.root, tp.topic, tp.partition)
        return end

    def last_positions(self, topic: str) -> dict[int, Position]:
        """Source position of the last durable record of every partition of ``topic``
        (read from each partition's tail; no file stays open)."""
        found: dict[int, Position] = {}
        for p in range(self._partition_count(topic)):
            writer = self._writers.get(TopicPartition(topic, p))
            if writer is not None:
                found[p] = writer.last_durable_position
            else:
                last = last_record(self._log.root, topic, p)
                found[p] = last.position if last is not None else NO_POSITION
        return found

    def compact(self, *, min_dirty_ratio: float | None = None) -> int:
        """Compact every compacted topic's partitions written by this producer; returns
        the records removed."""
        return self._housekeeping.compact(self._writers, min_dirty_ratio=min_dirty_ratio)

    def enforce_retention(self, *, max_partitions: int | None = None) -> int:
        """Apply the log's retention to the partitions written (all of them, or the next
        ``max_partitions`` in turn); segments removed."""
        return self._housekeeping.enforce_retention(self._writers,
                                                    max_partitions=max_partitions)

    def claim(self) -> None:
        """Nothing to do: the writer lock taken at creation keeps any other producer out."""

    def close(self) -> None:
        """Close every partition file and release the writer lock."""
        self._housekeeping.stop()
        try:
            self._durability.finish()  # every segment synced, the journal deleted
        finally:
            for writer in self._writers.values():
                writer.close()
        self._writers.clear()
        self._topic_locks.clear()
        self._lock_table.close()
        self._log_lock.release()
