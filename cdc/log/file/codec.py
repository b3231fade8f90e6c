"""The on-disk record: one JSON Lines line per record, checksummed.

    {"crc":"1a2b3c4d","offset":7,"ts":1763719200123,"lsn":23803808,"seq":3,"del":false,
     "kl":8,"key":{"id":42},"value":{…the event…}}

``crc`` is the CRC-32 (hex, 8 digits) of everything between ``",`` after it and the
final ``}``. Fields always come in this order, so a reader finds key and value by
position (``kl`` is the key's length in bytes) without parsing the JSON; Spark reads
the same files with its JSON reader and an explicit schema.

The hot paths take whole batches: ``encode_batch`` (a partition's records → the bytes to
append and their sparse-index entries) and ``decode_lines`` (a chunk of a segment → its
records), both in the native core (``cdc.native``); ``tests/reference/log_codec.py`` is
their readable definition, which the tests hold the native code to.
"""

from __future__ import annotations

import re
import struct
import zlib
from typing import NamedTuple

from ...native import CORE
from ..records import Message, Position

_HEAD = b'{"crc":"'
_BODY_START = len(_HEAD) + 10  # 8 hex digits, then '",'
_LINE = re.compile(
    rb'\{"crc":"([0-9a-f]{8})","offset":(\d+),"ts":(\d+),"lsn":(\d+),"seq":(\d+),'
    rb'"del":(true|false),"kl":(\d+),"key":')
_VALUE_SEP = b',"value":'
_VALUE_SEP_LEN = len(_VALUE_SEP)
_crc32 = zlib.crc32
# an index file's entry: ``segments.INDEX_ENTRY`` (which imports this module: defined here)
INDEX_ENTRY = struct.Struct(">QQ")


class RecordFormatError(ValueError):
    """A line is not a valid record; ``str(error)`` says why. ``position`` is where the
    line starts in the chunk when ``decode_lines`` found it (else None)."""

    def __init__(self, reason: str, position: int | None = None) -> None:
        super().__init__(reason)
        self.position = position


def encode_record(offset: int, timestamp_ms: int, position: Position, tombstone: bool,
                  key: bytes, value: bytes) -> bytes:
    """One complete line (with its newline) for a record."""
    body = b'"offset":%d,"ts":%d,"lsn":%d,"seq":%d,"del":%s,"kl":%d,"key":%s,"value":%s' % (
        offset, timestamp_ms, position.commit_lsn, position.seq,
        b"true" if tombstone else b"false", len(key), key, value)
    return b'{"crc":"%08x",%s}\n' % (zlib.crc32(body), body)


def decode_record(line: bytes, topic: str, partition: int) -> Message:
    """Parse and check one line (without its newline); raise RecordFormatError."""
    fields = _LINE.match(line)
    if fields is None or line[-1:] != b"}":
        raise RecordFormatError("not a record line (bad framing or field order)")
    crc, offset, ts, lsn, seq, tombstone, key_length = fields.groups()
    if _crc32(memoryview(line)[_BODY_START:-1]) != int(crc, 16):
        raise RecordFormatError("checksum mismatch")
    key_start = fields.end()
    key_end = key_start + int(key_length)
    if line[key_end:key_end + _VALUE_SEP_LEN] != _VALUE_SEP:
        raise RecordFormatError("key length does not match")
    return Message(topic, partition, int(offset), int(ts), line[key_start:key_end],
                   line[key_end + _VALUE_SEP_LEN:-1], Position(int(lsn), int(seq)),
                   tombstone == b"true")


def peek_offset(line: bytes) -> int:
    """The offset of a line already known to be well-formed (index building)."""
    start = _BODY_START + len(b'"offset":')
    end = line.index(b",", start)
    return int(line[start:end])


class LineBatch(NamedTuple):
    """What ``decode_lines`` found: the records kept, where the first line not consumed
    starts (``end``), the cursor's new ``next_offset`` and ``skipping``, and the bad line
    at ``end`` that stopped it, if one did."""

    messages: list[Message]
    end: int
    next_offset: int
    skipping: bool
    error: RecordFormatError | None


encode_batch = CORE.encode_batch
"""The lines of ``records`` numbered from ``first_offset``, the first written at byte
``size`` of the segment, and the sparse-index entries ``(offset, byte position)`` due: one
for each line starting ``index_interval`` or more bytes after the last indexed one. Returns
``(lines, index_entries, last_indexed)``; a record without a timestamp gets ``now_ms``."""

encode_topic_batch = CORE.encode_topic_batch
"""``encode_batch`` of a batch ``FileProducer.append`` puts in one partition whole (every
record of ``topic``, a topic of one partition, without a ``partition`` of its own), its
index entries packed as the index file holds them (``INDEX_ENTRY``); None when it is not
such a batch (the producer then groups it)."""


def decode_lines(chunk: bytes, start: int, limit: int, topic: str, partition: int,
                 next_offset: int, skipping: bool) -> LineBatch:
    """Decode the complete lines of ``chunk`` from byte ``start``: at most ``limit``
    records at or after ``next_offset``. While ``skipping`` (after a seek) records below it
    are passed over; otherwise an offset that does not grow is an error, as is a line
    ``decode_record`` refuses; the error carries the bad line's ``position``, and ``end``
    is that position."""
    messages, end, next_offset, skipping, error = CORE.decode_lines(
        chunk, start, limit, topic, partition, next_offset, skipping)
    return LineBatch(messages, end, next_offset, skipping,
                     None if error is None else RecordFormatError(*error))
