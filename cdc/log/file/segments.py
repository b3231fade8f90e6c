"""Segment files and their sparse offset indexes, in one partition directory.

A partition is a directory ``<topic>/partition=<p>/`` of segments named by their first
offset (``00000000000000000000.jsonl``), each with a sparse index
(``….index``: big-endian ``(offset, byte position)`` pairs every few KiB). Indexes are
hints: a missing or stale one is rebuilt from its segment.
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from cdc.errors import LogCorruptionError

from .codec import RecordFormatError, decode_record

SEGMENT_SUFFIX = ".jsonl"
INDEX_SUFFIX = ".index"
INDEX_ENTRY = struct.Struct(">QQ")
INDEX_INTERVAL_BYTES = 4096


def segment_name(base_offset: int) -> str:
    """File name of the segment starting at ``base_offset``."""
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def list_segments(directory: Path) -> list[int]:
    """Base offsets of the segments in ``directory``, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(n[:-len(SEGMENT_SUFFIX)]) for n in names
                  if n.endswith(SEGMENT_SUFFIX) and n[:-len(SEGMENT_SUFFIX)].isdigit())


def segment_for(bases: list[int], offset: int) -> int:
    """The base offset of the segment that holds ``offset`` (the first one if before)."""
    i = bisect.bisect_right(bases, offset) - 1
    return bases[max(i, 0)]


@dataclass(slots=True)
class SparseIndex:
    """In-memory copy of one segment's index."""

    offsets: list[int]
    positions: list[int]

    @classmethod
    def load(cls, path: Path, segment_size: int) -> SparseIndex:
        """Read an index, ignoring entries past the segment's end (after truncation)."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return cls([], [])
        offsets: list[int] = []
        positions: list[int] = []
        usable = len(data) - len(data) % INDEX_ENTRY.size
        for offset, position in INDEX_ENTRY.iter_unpack(data[:usable]):
            if position >= segment_size or (positions and position <= positions[-1]):
                break
            offsets.append(offset)
            positions.append(position)
        return cls(offsets, positions)

    def floor(self, offset: int) -> tuple[int, int] | None:
        """The last entry at or before ``offset``, as (offset, position)."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        return (self.offsets[i], self.positions[i]) if i >= 0 else None


@dataclass(frozen=True, slots=True)
class ScanResult:
    """What a scan of a segment found: where valid data ends and what it held."""

    valid_end: int
    next_offset: int | None
    last_line: bytes | None
    index: list[tuple[int, int]]
    torn_bytes: int


def scan_segment(path: Path, topic: str, partition: int, start: int = 0,
                 expected_offset: int | None = None) -> ScanResult:
    """Check every record from byte ``start``; rebuild index entries on the way.

    A torn tail (an unterminated last line, or trailing NUL bytes from a power loss) is
    reported in ``torn_bytes``; any other bad line raises LogCorruptionError with its place.
    """
    data = path.read_bytes()
    pos, last_indexed = start, -INDEX_INTERVAL_BYTES
    next_offset, last_line = expected_offset, None
    index: list[tuple[int, int]] = []
    while pos < len(data):
        newline = data.find(b"\n", pos)
        if newline < 0 or data[pos] == 0:
            break
        line = data[pos:newline]
        try:
            message = decode_record(line, topic, partition)
        except RecordFormatError as exc:
            raise LogCorruptionError(topic, partition, next_offset if next_offset is not None
                                     else -1, str(exc), file=str(path), position=pos) from None
        if next_offset is not None and message.offset < next_offset:
            raise LogCorruptionError(topic, partition, message.offset,
                                     f"offset goes backwards (expected ≥ {next_offset})",
                                     file=str(path), position=pos)
        if pos - last_indexed >= INDEX_INTERVAL_BYTES:
            index.append((message.offset, pos))
            last_indexed = pos
        next_offset, last_line = message.offset + 1, line
        pos = newline + 1
    tail = data[pos:]
    if tail.strip(b"\0") and b"\n" in tail.lstrip(b"\0"):
        raise LogCorruptionError(topic, partition, next_offset or -1,
                                 "unreadable bytes before valid data", file=str(path),
                                 position=pos)
    return ScanResult(pos, next_offset, last_line, index, len(data) - pos)
