"""Compaction: closed segments keep only the newest record of each key — and, when that
record leaves TOASTed columns out (its event's ``unchanged`` is not empty), every record of
the key back to the newest that holds the whole row, so that the values PostgreSQL did not
resend stay in the log (a consumer reading the compacted log fills them in as before).

A delete (tombstone) survives compaction for ``delete_retention_ms`` after it was written,
so a consumer that is behind still sees the key go away; after that the key disappears.
The active segment is never touched. Offsets keep their numbers (gaps appear), and each
segment is rewritten to a temporary file, fsync'd and renamed over the old one, so a
crash leaves either the old or the new segment, never a mix.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .codec import encode_record
from .reader import PartitionReader
from .segments import INDEX_ENTRY, INDEX_SUFFIX, list_segments, scan_segment, segment_name
from .writer import fsync_dir

log = logging.getLogger(__name__)

_UNCHANGED_LIST = b'"unchanged":["'
READ_BATCH = 2_000
"""Records read at once: a batch of large records (TOASTed rows) is megabytes each."""


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction of one partition did."""

    segments_rewritten: int
    records_removed: int


def compact_partition(directory: Path, topic: str, partition: int, *,
                      delete_retention_ms: int, min_dirty_ratio: float = 0.0,
                      now_ms: int | None = None) -> CompactionResult:
    """Compact the closed segments of one partition (see the module docstring)."""
    bases = list_segments(directory)
    if len(bases) < 2:
        return CompactionResult(0, 0)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    keep_from: dict[bytes, int] = {}  # key → the offset its kept records begin at
    total = 0
    reader = PartitionReader(directory, topic, partition)
    reader.seek(bases[0])
    try:
        while batch := reader.read(READ_BATCH):
            for message in batch:
                if message.tombstone or not leaves_columns_out(message.value):
                    keep_from[message.key] = message.offset
                else:  # no whole row of the key yet: keep every record of it
                    keep_from.setdefault(message.key, -1)
            total += len(batch)
    finally:
        reader.close()
    if total == 0 or 1 - len(keep_from) / total < min_dirty_ratio:
        return CompactionResult(0, 0)
    rewritten = removed = 0
    for base in bases[:-1]:
        _, dropped = _rewrite(directory / segment_name(base), topic, partition, keep_from,
                                 now_ms - delete_retention_ms)
        if dropped:
            rewritten += 1
            removed += dropped
    if rewritten:
        fsync_dir(directory)
        log.info("compacted %d segments, %d records removed", rewritten, removed,
                 extra={"topic": topic, "partition": partition})
    return CompactionResult(rewritten, removed)


def leaves_columns_out(value: bytes | None) -> bool:
    """Whether an event's ``unchanged`` lists columns (TOASTed values PostgreSQL did not
    resend). A byte search, no parse: the events are compact JSON, and inside a string a
    quote is escaped, so only a member ``"unchanged"`` holding a list of names matches (a
    row column named ``unchanged`` could too: that keeps a record more, never one less)."""
    return value is not None and _UNCHANGED_LIST in value


def _rewrite(path: Path, topic: str, partition: int, keep_from: dict[bytes, int],
             tombstone_horizon_ms: int) -> tuple[int, int]:
    reader = PartitionReader(path.parent, topic, partition)
    reader.seek(int(path.name[:20]))
    keep: list[bytes] = []
    dropped = 0
    end = os.path.getsize(path)
    limit = _next_base(path)
    try:
        while batch := reader.read(READ_BATCH):
            stop = False
            for m in batch:
                if m.offset >= limit:
                    stop = True
                    break
                superseded = m.offset < keep_from.get(m.key, -1)
                expired = m.tombstone and m.timestamp_ms < tombstone_horizon_ms
                if superseded or expired:
                    dropped += 1
                else:
                    keep.append(encode_record(m.offset, m.timestamp_ms, m.position,
                                              m.tombstone, m.key, m.value))
            if stop:
                break
    finally:
        reader.close()
    if not dropped:
        return len(keep), 0
    tmp = path.with_name(path.name + ".compacting")
    with tmp.open("wb") as out:
        out.write(b"".join(keep))
        out.flush()
        os.fsync(out.fileno())
    if os.path.getsize(path) != end:
        tmp.unlink()  # the segment changed under us (it was not closed): leave it
        return len(keep), 0
    os.replace(tmp, path)
    index = path.with_suffix(INDEX_SUFFIX)
    scan = scan_segment(path, topic, partition)
    index.write_bytes(b"".join(INDEX_ENTRY.pack(o, p) for o, p in scan.index))
    return len(keep), dropped


def _next_base(path: Path) -> int:
    later = [b for b in list_segments(path.parent) if b > int(path.name[:20])]
    return later[0] if later else 1 << 62

