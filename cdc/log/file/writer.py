"""Appending to one partition: durable batches, segment rollover, recovery on open.

A writer keeps its segment and index files open only while the log's ``HandlePool``
lets it (see ``handles``); closed by the pool, it fsyncs first and reopens on next use.
A ``journaled`` writer leaves durability to the producer's journal (``journal``): it opens,
appends to and closes its files on each write (no pool, no fsync unless the producer asks
for one: a batch of a single partition is made durable by its segment's own fdatasync,
with no journal copy), and only a segment rollover syncs the finished segment.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from itertools import starmap
from pathlib import Path

from ..records import NO_POSITION, Position, Record
from .codec import decode_record, encode_batch, encode_topic_batch
from .encoded import EncodedPart
from .handles import HandlePool
from .segments import (
    INDEX_ENTRY,
    INDEX_INTERVAL_BYTES,
    INDEX_SUFFIX,
    SparseIndex,
    list_segments,
    scan_segment,
    segment_name,
)

log = logging.getLogger(__name__)


def sync_file(path: str) -> None:
    """fdatasync a file by name (whoever wrote it); a file deleted meanwhile is skipped."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:  # removed by retention or compaction: nothing to keep
        return
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


# the most index entries a journaled writer gathers before writing them (64 entries: a
# seek into the active segment scans at most ~256 KiB further than a complete index's)
INDEX_PENDING_BYTES = 64 * INDEX_ENTRY.size


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written < len(data):
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view):]


def _append_once(path: str, data: bytes, *, create: bool = False,
                 sync: bool = False) -> None:
    """Append ``data`` to a file through a descriptor of its own, closed at once (after an
    fdatasync when ``sync``)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | (os.O_CREAT if create else 0), 0o644)
    try:
        _write_all(fd, data)
        if sync:
            os.fdatasync(fd)
    finally:
        os.close(fd)


def _packed(entries: list[tuple[int, int]]) -> bytes:
    """Index entries ``(offset, byte position)`` as the index file holds them."""
    return b"".join(starmap(INDEX_ENTRY.pack, entries))


def fsync_dir(directory: Path) -> None:
    """Make a file creation, rename or deletion in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PartitionWriter:
    """The single writer of one partition (the process holding the log's writer lock)."""

    file_count = 2  # the segment and its index
    __slots__ = ("__weakref__", "_base", "_dirty", "_fd", "_index_fd", "_index_path",
                 "_index_pending", "_last_indexed", "_opened_at", "_pool", "_size",
                 "_sync_error", "directory",
                 "fsync", "journaled", "last_position", "next_offset", "partition",
                 "segment_bytes", "segment_ms", "segment_path", "topic")

    def __init__(self, directory: Path, topic: str, partition: int, *, segment_bytes: int,
                 segment_ms: int, fsync: bool, pool: HandlePool | None = None,
                 journaled: bool = False) -> None:
        self.directory = directory
        self.journaled = journaled
        self.topic = topic
        self.partition = partition
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.fsync = fsync
        self.next_offset = 0
        self.last_position = NO_POSITION
        self._pool = pool if pool is not None else HandlePool(self.file_count)
        self._fd = -1
        self._index_fd = -1
        self._dirty = False  # written since the last fdatasync
        self._sync_error: OSError | None = None
        self._base = 0
        self.segment_path = ""  # the active segment's file
        self._index_path = ""
        # a journaled writer's index entries not written yet (``_put``)
        self._index_pending = bytearray()
        self._size = 0
        self._opened_at = 0.0
        self._last_indexed = -INDEX_INTERVAL_BYTES
        directory.mkdir(parents=True, exist_ok=True)
        self._recover()

    # -- recovery -------------------------------------------------------------------
    def _recover(self) -> None:
        bases = list_segments(self.directory)
        if not bases:
            self._start_segment(0)
            return
        base = bases[-1]
        path = self.directory / segment_name(base)
        index = SparseIndex.load(path.with_suffix(INDEX_SUFFIX), path.stat().st_size)
        start, expected = 0, base
        if index.offsets:
            expected, start = index.offsets[-1], index.positions[-1]
        scan = scan_segment(path, self.topic, self.partition, start, expected)
        if scan.torn_bytes:
            log.warning("truncating a torn tail of %d bytes", scan.torn_bytes,
                        extra={"topic": self.topic, "partition": self.partition,
                               "file": str(path)})
            os.truncate(path, scan.valid_end)
        self.next_offset = scan.next_offset if scan.next_offset is not None else base
        if scan.last_line is None and len(bases) > 1:
            self._recover_position_from(bases[-2])
        elif scan.last_line is not None:
            self.last_position = decode_record(scan.last_line, self.topic,
                                               self.partition).position
        self._start_segment(base, existing_size=scan.valid_end, index=index,
                            extra_index=scan.index)

    def _recover_position_from(self, base: int) -> None:
        path = self.directory / segment_name(base)
        scan = scan_segment(path, self.topic, self.partition, 0, base)
        if scan.last_line is not None:
            self.last_position = decode_record(scan.last_line, self.topic,
                                               self.partition).position

    def _start_segment(self, base: int, *, existing_size: int = 0,
                       index: SparseIndex | None = None,
                       extra_index: Sequence[tuple[int, int]] = ()) -> None:
        """Make ``base`` the active segment (created if missing, index rewritten); its
        files are opened on the next append."""
        path = self.directory / segment_name(base)
        created = not path.exists()
        if created:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
        entries = list(zip(index.offsets, index.positions, strict=True)) if index else []
        entries += [e for e in extra_index if not entries or e[1] > entries[-1][1]]
        index_fd = os.open(path.with_suffix(INDEX_SUFFIX),
                           os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(index_fd, b"".join(INDEX_ENTRY.pack(o, p) for o, p in entries))
        finally:
            os.close(index_fd)
        self._last_indexed = entries[-1][1] if entries else -INDEX_INTERVAL_BYTES
        self._base, self._size = base, existing_size
        self.segment_path = os.fspath(path)
        self._index_path = os.fspath(path.with_suffix(INDEX_SUFFIX))
        self._opened_at = time.time()
        if created:
            fsync_dir(self.directory)

    def _append_index(self, entries: bytes) -> None:
        """Add sparse index entries (the index file is opened when first needed)."""
        if self._index_fd < 0:
            path = self.directory / segment_name(self._base)
            self._index_fd = os.open(path.with_suffix(INDEX_SUFFIX),
                                     os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(self._index_fd, entries)

    # -- appending -------------------------------------------------------------------
    def append(self, records: Sequence[Record], now_ms: int, *, sync: bool = True) -> int:
        """Write ``records`` after the last one; durable on return when ``fsync`` (unless
        ``sync=False``: then the caller calls ``sync()``).

        Returns the offset of the first record written.
        """
        first, _ = self.write(records, now_ms, sync=sync)
        return first

    def write(self, records: Sequence[Record], now_ms: int, *,
              sync: bool = False) -> tuple[int, bytes]:
        """Write ``records`` after the last one (into the page cache unless ``sync``: then
        the segment is fdatasynced, even when ``journaled``); returns the first offset
        written and the bytes (the journal's copy)."""
        first = self._next_first()
        data, entries, self._last_indexed = encode_batch(
            records, first, now_ms, self._size, self._last_indexed, INDEX_INTERVAL_BYTES)
        last = records[-1].position if records else NO_POSITION
        return self._put(first, data, _packed(entries), len(records), last, sync=sync)

    def write_topic(self, records: list[Record], topic: str, now_ms: int, *,
                    sync: bool = False) -> tuple[int, bytes] | None:
        """As ``write``, of a batch all of ``topic`` without a ``partition`` of its own
        (``FileProducer.append`` of a topic of one partition), checked as it is encoded
        (``encode_topic_batch``); None, and nothing written, when it is not one. (A segment
        due to roll over may have been rolled: as the next write would.)"""
        first = self._next_first()
        encoded = encode_topic_batch(records, topic, first, now_ms, self._size,
                                     self._last_indexed, INDEX_INTERVAL_BYTES)
        if encoded is None:
            return None
        data, index_entries, self._last_indexed = encoded
        last = records[-1].position if records else NO_POSITION
        return self._put(first, data, index_entries, len(records), last, sync=sync)

    def write_encoded(self, part: EncodedPart, now_ms: int, *,
                      sync: bool = False) -> tuple[int, bytes]:
        """As ``write`` of the records ``part`` stands for, their lines encoded by ``part``
        itself (``FileProducer.append_encoded``)."""
        first = self._next_first()
        data, entries, self._last_indexed = part.encode(
            first, now_ms, self._size, self._last_indexed, INDEX_INTERVAL_BYTES)
        return self._put(first, data, _packed(entries), part.count, part.last_position,
                         sync=sync)

    def _next_first(self) -> int:
        """The offset of the next record, a new segment started first when it is due."""
        if self._size >= self.segment_bytes or (
                self._size and (time.time() - self._opened_at) * 1000 >= self.segment_ms):
            self._finish_segment()
            self._start_segment(self.next_offset)
        return self.next_offset

    def _put(self, first: int, data: bytes, index_entries: bytes, count: int,
             last: Position, *, sync: bool) -> tuple[int, bytes]:
        """Write the encoded lines of ``count`` records from ``first`` (the last at source
        position ``last``) and their index entries (packed: ``_packed``)."""
        if self.journaled:  # open, write, close: no file stays open, no pool to consult
            _append_once(self.segment_path, data, sync=sync and self.fsync)
            if index_entries:
                # gathered, to open the index once per INDEX_PENDING_BYTES: an index
                # behind its segment only makes a seek scan further (recovery rebuilds
                # the entries a crash lost from the segment itself)
                self._index_pending += index_entries
                if len(self._index_pending) >= INDEX_PENDING_BYTES:
                    self._write_pending_index()
        else:
            self._write_pooled(data, index_entries, sync=sync)
        self._size += len(data)
        self.next_offset = first + count
        if count and last != NO_POSITION:
            self.last_position = max(self.last_position, last)
        return first, data

    def _write_pooled(self, data: bytes, index_entries: bytes, *, sync: bool) -> None:
        pool = self._pool
        pool.acquire(self)
        try:
            if self._fd < 0:
                self._fd = os.open(self.segment_path, os.O_WRONLY | os.O_APPEND)
            self._dirty = True
            _write_all(self._fd, data)
            if sync:
                self._sync_open()
            if index_entries:
                self._append_index(index_entries)
        finally:
            pool.release(self)

    def _write_pending_index(self) -> None:
        if self._index_pending:
            _append_once(self._index_path, bytes(self._index_pending), create=True)
            self._index_pending.clear()

    def _finish_segment(self) -> None:
        """Make the active segment durable and close it (before rolling over)."""
        self._write_pending_index()
        self._sync_open()
        if self.journaled:  # the journal may drop its copy at a checkpoint
            sync_file(self.segment_path)
        self._close_fds()

    def matches_disk(self) -> bool:
        """True when nobody else appended since this writer's last write: its segment is
        still the partition's newest and has exactly the bytes it wrote."""
        try:
            size = (self.directory / segment_name(self._base)).stat().st_size
        except OSError:
            return False
        bases = list_segments(self.directory)
        return size == self._size and bool(bases) and bases[-1] == self._base

    def sync(self) -> None:
        """Make what was appended durable (fdatasync), if the log is configured to."""
        if not self._dirty and self._sync_error is None:
            return
        with self._pool.use(self):
            self._sync_open()

    def _sync_open(self) -> None:
        if self._sync_error is not None:
            error, self._sync_error = self._sync_error, None
            raise error
        if self._dirty and self._fd >= 0:
            if self.fsync:
                os.fdatasync(self._fd)
            self._dirty = False

    @property
    def last_durable_position(self) -> Position:
        """The source position of the last record written (``NO_POSITION`` when none)."""
        return self.last_position

    @property
    def has_open_files(self) -> bool:
        return self._fd >= 0

    def close_files(self) -> None:
        """Fsync what is pending, then close the files (the pool's eviction)."""
        try:
            self._sync_open()
        except OSError as exc:  # reported by the next sync(), in the appending thread
            self._sync_error = exc
            self._dirty = False
        self._close_fds()

    def _close_fds(self) -> None:
        for fd in (self._fd, self._index_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._index_fd = -1

    def close(self) -> None:
        """Make pending appends durable and close the segment and index files."""
        try:
            self._write_pending_index()
        except OSError as exc:  # the segment is whole: the index is rebuilt on open
            log.warning("cannot write index entries while closing: %s", exc,
                        extra={"topic": self.topic, "partition": self.partition})
        self._pool.forget(self)
        if self._sync_error is not None:
            log.error("fsync failed while closing: %s", self._sync_error,
                      extra={"topic": self.topic, "partition": self.partition})
            self._sync_error = None
