"""The producer's batch journal: one fdatasync per batch, however many partitions it spans.

An append writes each partition's lines to its segment (into the page cache only), then
the whole batch once more to the journal, and fdatasyncs the journal: the batch is durable
when that returns. A checkpoint (``Checkpointer``, in a background thread) fdatasyncs the
segments written since the previous one and then deletes the journal files they cover.
When a producer opens the log, any journal left behind is replayed into the partitions
that lost its batches (a machine crash loses page-cache writes, never the journal) — see
``replay``.

A journal file is ``_journal/<generation>.journal``: a sequence of batches, each

    magic "DJB1" | body length u32 | CRC-32 of the body u32 | body
    body := part count u32, then per part:
            topic length u16 | topic (UTF-8) | partition u32 | first offset u64 |
            data length u32 | data (the part's log lines, exactly as in the segment)

A batch cut short at the end of the newest file was never acknowledged (the crash came
before its fdatasync returned) and is ignored; anything else that does not check out is
corruption, reported with the file and byte position.
"""

from __future__ import annotations

import logging
import os
import struct
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cdc.errors import LogError, TerminalError
from cdc.native import CORE

from .writer import fsync_dir

log = logging.getLogger(__name__)

JOURNAL_DIR = "_journal"
SUFFIX = ".journal"
MAGIC = b"DJB1"
_HEADER = struct.Struct(">4sII")
_PART_HEAD = struct.Struct(">H")
_PART_FIELDS = struct.Struct(">IQI")
_IOV_MAX = os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 16
_crc32 = CORE.crc32  # zlib.crc32's value, computed with the GIL released


class JournalCorruptionError(LogError, TerminalError):
    """The journal holds something that is not a batch this log wrote."""

    def __init__(self, reason: str, *, file: Path, position: int) -> None:
        self.reason = reason
        self.file = file
        self.position = position
        super().__init__(f"corrupt log journal ({file} byte {position}): {reason}; the "
                         "batches in it may be missing from their partitions: check them with "
                         "`cdc log verify`, then move the file away to start")


@dataclass(frozen=True, slots=True)
class JournalPart:
    """One partition's share of a journaled batch."""

    topic: str
    partition: int
    first_offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class JournalBatch:
    """A batch read back from the journal, with where it was found."""

    path: Path
    position: int
    parts: list[JournalPart]


def journal_dir(root: Path) -> Path:
    """Where a log's journal files live."""
    return root / JOURNAL_DIR


def journal_files(root: Path) -> list[Path]:
    """The journal files of a log, oldest first."""
    directory = journal_dir(root)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.endswith(SUFFIX))


def encode_batch(parts: Sequence[tuple[bytes, int, int, bytes]]) -> bytes:
    """One journal entry for ``(topic UTF-8, partition, first offset, data)`` parts."""
    chunks = [struct.pack(">I", len(parts))]
    for topic, partition, first_offset, data in parts:
        chunks += (_PART_HEAD.pack(len(topic)), topic,
                   _PART_FIELDS.pack(partition, first_offset, len(data)), data)
    body = b"".join(chunks)
    return _HEADER.pack(MAGIC, len(body), zlib.crc32(body)) + body


def batch_buffers(parts: Sequence[tuple[bytes, int, int, bytes]]) -> list[bytes]:
    """``encode_batch(parts)`` as the buffers to write one after the other: the parts'
    data is not copied (the CRC runs over the pieces in turn, in the native core when it
    is installed)."""
    chunks = [struct.pack(">I", len(parts))]
    for topic, partition, first_offset, data in parts:
        chunks += (_PART_HEAD.pack(len(topic)), topic,
                   _PART_FIELDS.pack(partition, first_offset, len(data)), data)
    crc = length = 0
    for chunk in chunks:
        crc = _crc32(chunk, crc)
        length += len(chunk)
    return [_HEADER.pack(MAGIC, length, crc), *chunks]


def _write_buffers(fd: int, buffers: list[bytes], iov_max: int) -> None:
    """Write ``buffers`` in order (``os.writev``, at most ``iov_max`` at a time)."""
    pending: list[bytes | memoryview] = [b for b in buffers if b]
    first = 0
    while first < len(pending):
        written = os.writev(fd, pending[first:first + iov_max])
        while written:
            size = len(pending[first])
            if written < size:  # a short write: the rest of this buffer next time
                pending[first] = memoryview(pending[first])[written:]
                break
            written -= size
            first += 1


def _decode_body(body: bytes, path: Path, position: int) -> list[JournalPart]:
    def corrupt(reason: str) -> JournalCorruptionError:
        return JournalCorruptionError(f"batch {reason}", file=path, position=position)

    try:
        (count,) = struct.unpack_from(">I", body, 0)
        at, parts = 4, []
        for _ in range(count):
            (topic_length,) = _PART_HEAD.unpack_from(body, at)
            at += _PART_HEAD.size
            topic = body[at:at + topic_length].decode()
            at += topic_length
            partition, first_offset, length = _PART_FIELDS.unpack_from(body, at)
            at += _PART_FIELDS.size
            if at + length > len(body):
                raise corrupt("part runs past the batch's end")
            parts.append(JournalPart(topic, partition, first_offset, body[at:at + length]))
            at += length
    except (struct.error, UnicodeDecodeError) as exc:
        raise corrupt(f"is malformed ({exc})") from None
    if at != len(body):
        raise corrupt("has bytes after its last part")
    return parts


def read_batches(root: Path) -> Iterator[JournalBatch]:
    """Every batch of the log's journal, oldest first (see the module's doc for what a
    cut-short or damaged batch means)."""
    files = journal_files(root)
    for index, path in enumerate(files):
        newest = index == len(files) - 1
        data = path.read_bytes()
        position = 0
        while position < len(data):
            header = data[position:position + _HEADER.size]
            if len(header) < _HEADER.size:
                if newest:
                    _cut_short(path, position)
                    break
                raise JournalCorruptionError("batch header cut short", file=path,
                                             position=position)
            magic, length, crc = _HEADER.unpack(header)
            if magic != MAGIC:
                raise JournalCorruptionError("not a batch (bad magic)", file=path,
                                             position=position)
            start = position + _HEADER.size
            body = data[start:start + length]
            if len(body) < length or zlib.crc32(body) != crc:
                if newest and start + length >= len(data):
                    _cut_short(path, position)
                    break
                raise JournalCorruptionError("batch checksum mismatch", file=path,
                                             position=position)
            yield JournalBatch(path, position, _decode_body(body, path, position))
            position = start + length


def _cut_short(path: Path, position: int) -> None:
    log.warning("ignoring a journal batch cut short by a crash (never acknowledged)",
                extra={"file": str(path), "position": position})


class Journal:
    """The open journal: appends batches (durable on return) and rotates files."""

    def __init__(self, root: Path, *, iov_max: int = _IOV_MAX) -> None:
        """``iov_max``: the most buffers one ``os.writev`` is given."""
        self.directory = journal_dir(root)
        self._iov_max = iov_max
        if not self.directory.is_dir():
            self.directory.mkdir()
            fsync_dir(root)
        existing = journal_files(root)
        self._generation = int(existing[-1].name[:-len(SUFFIX)]) + 1 if existing else 0
        self._fd = -1
        self.path = self._open_next()
        self.bytes_written = 0
        self.started = time.monotonic()

    def _open_next(self) -> Path:
        path = self.directory / f"{self._generation:020d}{SUFFIX}"
        self._generation += 1
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        fsync_dir(self.directory)
        return path

    def write(self, parts: Sequence[tuple[bytes, int, int, bytes]]) -> None:
        """Append one batch and make it durable (fdatasync)."""
        buffers = batch_buffers(parts)  # encode_batch's bytes, the data not copied again
        self.bytes_written += sum(map(len, buffers))
        _write_buffers(self._fd, buffers, self._iov_max)
        os.fdatasync(self._fd)

    def rotate(self) -> Path:
        """Start a new file; returns the one just finished (delete it once what it covers
        is synced in the segments)."""
        finished = self.path
        os.close(self._fd)
        self.path = self._open_next()
        self.bytes_written = 0
        self.started = time.monotonic()
        return finished

    def close(self) -> None:
        """Close the current file (it stays on disk until ``discard``)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def discard(paths: Sequence[Path]) -> None:
    """Delete journal files whose batches are synced in the segments."""
    for path in paths:
        path.unlink(missing_ok=True)
    if paths:
        fsync_dir(paths[0].parent)

