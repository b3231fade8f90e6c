"""The readable definition of the log codec's batch functions, which the native core
(``cdc.log.file.codec.encode_batch``, ``encode_topic_batch``, ``decode_lines``) computes:
the differential, property and fuzz tests hold it to these byte for byte."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import starmap

from cdc.log.file.codec import INDEX_ENTRY, RecordFormatError, decode_record, encode_record
from cdc.log.records import Message, Record

EncodedBatch = tuple[bytes, list[tuple[int, int]], int]
"""``(lines, index entries (offset, byte), last indexed byte)``."""
LineBatch = tuple[list[Message], int, int, bool, tuple[str, int] | None]
"""``(messages, end, next_offset, skipping, (reason, position) or None)``."""


def encode_batch_reference(records: Sequence[Record], first_offset: int, now_ms: int,
                           size: int, last_indexed: int, index_interval: int) -> EncodedBatch:
    """The lines of ``records`` numbered from ``first_offset``, the first written at byte
    ``size`` of the segment, and the sparse-index entries ``(offset, byte position)`` due:
    one for each line starting ``index_interval`` or more bytes after the last indexed one.
    Returns ``(lines, index_entries, last_indexed)``. A record without a timestamp gets
    ``now_ms``."""
    lines = []
    entries = []
    position = size
    offset = first_offset
    for record in records:
        if position - last_indexed >= index_interval:
            entries.append((offset, position))
            last_indexed = position
        line = encode_record(offset, record.timestamp_ms or now_ms, record.position,
                             record.tombstone, record.key, record.value)
        lines.append(line)
        position += len(line)
        offset += 1
    return b"".join(lines), entries, last_indexed


def encode_topic_batch_reference(records: Sequence[Record], topic: str, first_offset: int,
                                 now_ms: int, size: int, last_indexed: int,
                                 index_interval: int) -> tuple[bytes, bytes, int] | None:
    """``encode_batch_reference`` of a batch ``FileProducer.append`` puts in one partition
    whole: every record of ``topic`` (a topic of one partition) without a ``partition`` of
    its own, its index entries packed as the index file holds them (``INDEX_ENTRY``). None
    when it is not such a batch (the producer then groups it)."""
    if not all(isinstance(record, Record) and record.partition is None
               and record.topic == topic for record in records):
        return None
    lines, entries, last_indexed = encode_batch_reference(
        records, first_offset, now_ms, size, last_indexed, index_interval)
    return lines, b"".join(starmap(INDEX_ENTRY.pack, entries)), last_indexed


def decode_lines_reference(chunk: bytes, start: int, limit: int, topic: str, partition: int,
                           next_offset: int, skipping: bool) -> LineBatch:
    """Decode the complete lines of ``chunk`` from byte ``start``: at most ``limit``
    records at or after ``next_offset``. While ``skipping`` (after a seek) records below
    it are passed over; otherwise an offset that does not grow is an error, as is a line
    ``decode_record`` refuses. Returns ``(messages, end, next_offset, skipping, error)``:
    ``end`` is where the first line not consumed starts; ``error`` is None or
    ``(reason, position of the bad line)``, and then ``end`` is that position."""
    out: list[Message] = []
    while len(out) < limit:
        newline = chunk.find(b"\n", start)
        if newline < 0:
            break
        try:
            message = decode_record(chunk[start:newline], topic, partition)
        except RecordFormatError as exc:
            return out, start, next_offset, skipping, (str(exc), start)
        if message.offset >= next_offset:
            skipping = False
            out.append(message)
            next_offset = message.offset + 1
        elif not skipping:
            return (out, start, next_offset, skipping,
                    (f"offset {message.offset} repeats or goes backwards", start))
        start = newline + 1
    return out, start, next_offset, skipping, None
