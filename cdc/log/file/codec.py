"""The on-disk record: one JSON Lines line per record, checksummed.

    {"crc":"1a2b3c4d","offset":7,"ts":1763719200123,"lsn":23803808,"seq":3,"del":false,
     "kl":8,"key":{"id":42},"value":{…the event…}}

``crc`` is the CRC-32 (hex, 8 digits) of everything between ``",`` after it and the
final ``}``. Fields always come in this order, so a reader finds key and value by
position (``kl`` is the key's length in bytes) without parsing the JSON; Spark reads
the same files with its JSON reader and an explicit schema.
"""

from __future__ import annotations

import re
import zlib

from ..records import Message, Position

_HEAD = b'{"crc":"'
_BODY_START = len(_HEAD) + 10  # 8 hex digits, then '",'
_LINE = re.compile(
    rb'\{"crc":"([0-9a-f]{8})","offset":(\d+),"ts":(\d+),"lsn":(\d+),"seq":(\d+),'
    rb'"del":(true|false),"kl":(\d+),"key":')
_VALUE_SEP = b',"value":'
_VALUE_SEP_LEN = len(_VALUE_SEP)
_crc32 = zlib.crc32


class RecordFormatError(ValueError):
    """A line is not a valid record; ``reason`` says why."""


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
