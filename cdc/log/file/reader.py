"""Reading one partition sequentially from any offset, across segment files.

A reader opens its segment lazily, on the first ``read`` after a ``seek``, and only while
the log's ``HandlePool`` lets it; closed by the pool, it reopens where it was.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from cdc.errors import LogCorruptionError

from ..records import Message
from .codec import decode_lines
from .handles import HandlePool
from .segments import INDEX_SUFFIX, SparseIndex, list_segments, segment_for, segment_name
from .topics import read_meta

READ_CHUNK = 1 << 20  # the most one read takes (a longer record is read on to its end)
MIN_READ = 4 << 10  # the least: a read sized to its records (``_read_size``)
FIRST_LINE_BYTES = 1024  # a record's size guessed before one is read


class PartitionReader:
    """A cursor over one partition. ``read`` returns what is there now and never blocks.

    Every record read is checked (checksum, framing, increasing offsets); a bad one
    raises LogCorruptionError with the file and byte position.
    """

    file_count = 1
    __slots__ = ("__weakref__", "_at_end", "_base", "_file", "_line_bytes", "_partial", "_pool",
                 "_pos", "_skipping", "directory", "next_offset", "partition", "topic")

    def __init__(self, directory: Path, topic: str, partition: int,
                 pool: HandlePool | None = None) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.next_offset = 0
        self._pool = pool if pool is not None else HandlePool(2)
        self._file: BinaryIO | None = None
        self._base = -1        # segment of the cursor; -1: not located yet (after a seek)
        self._pos = 0          # byte position of the next unread line
        self._partial = b""    # bytes after _pos, last read, that hold no full line
        self._skipping = False  # after a seek: records below next_offset are skipped
        self._line_bytes = FIRST_LINE_BYTES  # the records' mean size, as read so far
        self._at_end = False  # the last read reached the end of the file

    def seek(self, offset: int) -> None:
        """Position the cursor at the first record with offset ≥ ``offset`` (lazily: no
        file is opened until the next ``read``)."""
        self.close_files()
        self.next_offset = offset
        self._skipping = True
        self._base = -1

    def _locate(self) -> bool:
        """Open the segment holding ``next_offset``; False when the partition is empty."""
        bases = list_segments(self.directory)
        if not bases:
            return False
        base = segment_for(bases, self.next_offset)
        path = self.directory / segment_name(base)
        try:
            self._open(base, path)
            size = os.path.getsize(path)
        except FileNotFoundError:  # removed by retention meanwhile
            return self._locate()
        floor = SparseIndex.load(path.with_suffix(INDEX_SUFFIX), size).floor(self.next_offset)
        if floor is not None:
            self._pos = floor[1]
        return True

    def _reopen(self) -> bool:
        """Reopen the segment the pool closed; False when it is gone (then relocate)."""
        try:
            self._file = (self.directory / segment_name(self._base)).open("rb", buffering=0)
        except FileNotFoundError:
            self._base = -1
            return False
        return True

    def read(self, max_records: int = 10_000) -> list[Message]:
        """Up to ``max_records`` complete records after the cursor (may be empty)."""
        with self._pool.use(self):
            if self._file is None and (self._base < 0 or not self._reopen()):
                self._skipping = True
                if not self._locate():
                    return []
            while True:
                batch = self._read_lines(max_records)
                if batch:
                    return batch
                if self._at_end and not self._advance_segment():
                    return batch  # otherwise the lines read were skipped: read on

    def _read_size(self, limit: int) -> int:
        """Bytes to read for ``limit`` records: about their size, so that a consumer
        taking a few records of each of many partitions does not read (and copy) a whole
        ``READ_CHUNK`` for each, only to read most of it again next time."""
        return min(READ_CHUNK, max(MIN_READ, limit * self._line_bytes * 5 // 4))

    def _read_lines(self, limit: int) -> list[Message]:
        assert self._file is not None
        # from the start of the unread line: an incomplete line is read again, whole,
        # which costs less than joining it to the next chunk
        self._file.seek(self._pos)
        parts = []
        size = self._read_size(limit)
        while True:  # a record longer than the read is read on, READ_CHUNK at a time
            data = self._file.read(size)
            parts.append(data)
            if len(data) < size or b"\n" in data:
                break
            size = READ_CHUNK
        self._at_end = len(parts[-1]) < size
        chunk = parts[0] if len(parts) == 1 else b"".join(parts)
        # one call decodes every complete line (checksum, framing, growing offsets)
        batch = decode_lines(chunk, 0, limit, self.topic, self.partition, self.next_offset,
                             self._skipping)
        self.next_offset, self._skipping = batch.next_offset, batch.skipping
        if batch.error is not None:
            raise self._corrupt(str(batch.error), self._pos + batch.end)
        start = batch.end
        self._pos += start
        self._partial = chunk[start:] if chunk.find(b"\n", start) < 0 else b""
        if batch.messages:
            self._line_bytes = max(1, start // len(batch.messages))
        return batch.messages

    def _advance_segment(self) -> bool:
        """At the end of the current segment, move on to the next one if there is one."""
        assert self._file is not None
        bases = list_segments(self.directory)
        later = [b for b in bases if b > self._base]
        if not later:
            if bases and self._base < bases[0]:
                # our segment was removed by retention: go on from the log's start
                self.seek(max(self.next_offset, bases[0]))
                return self._locate()
            return False
        if os.fstat(self._file.fileno()).st_size > self._pos:
            if self._partial:
                raise self._corrupt("segment ends with an incomplete record", self._pos)
            return True  # the writer added more before rolling over: read it first
        if later[0] > self.next_offset and not self._skipping and not self._compacted():
            raise self._corrupt(f"offsets {self.next_offset}..{later[0] - 1} are missing: the "
                                f"segment ends before the next one ({segment_name(later[0])}) "
                                "begins (truncated?); run 'cdc log verify'", self._pos)
        self._open(later[0], self.directory / segment_name(later[0]))
        return True

    def _compacted(self) -> bool:
        """True for a compacted topic, whose segments may legitimately end early."""
        meta = read_meta(self.directory.parent.parent, self.topic)
        return meta is None or meta.compacted

    def _open(self, base: int, path: Path) -> None:
        self.close_files()
        self._file = path.open("rb", buffering=0)
        self._base, self._pos, self._partial = base, 0, b""

    def _corrupt(self, reason: str, position: int) -> LogCorruptionError:
        return LogCorruptionError(self.topic, self.partition, self.next_offset, reason,
                                  file=str(self.directory / segment_name(self._base)),
                                  position=position)

    @property
    def has_open_files(self) -> bool:
        return self._file is not None

    def close_files(self) -> None:
        """Close the open segment file (the cursor stays; reopened on the next read)."""
        file, self._file = self._file, None  # the pool may call this from another thread
        if file is not None:
            file.close()

    def close(self) -> None:
        """Release the open segment file."""
        self._pool.forget(self)
