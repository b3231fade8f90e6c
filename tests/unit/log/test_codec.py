"""The record line: round trip, checksums, and what Spark sees (plain JSON)."""

from __future__ import annotations

import json

import pytest

from cdc.log import Position
from cdc.log.file.codec import RecordFormatError, decode_record, encode_record


def test_round_trip_and_plain_json() -> None:
    line = encode_record(7, 1_700_000_000_000, Position(23803808, 3), True, b'{"id":42}',
                         b'{"op":"d","key":{"id":42}}')
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    message = decode_record(line[:-1], "t", 2)
    assert (message.topic, message.partition, message.offset) == ("t", 2, 7)
    assert message.timestamp_ms == 1_700_000_000_000
    assert message.position == Position(23803808, 3)
    assert message.tombstone is True
    assert message.key == b'{"id":42}'
    assert message.value == b'{"op":"d","key":{"id":42}}'
    parsed = json.loads(line)
    assert parsed["value"] == {"op": "d", "key": {"id": 42}}
    assert parsed["offset"] == 7 and parsed["lsn"] == 23803808


@pytest.mark.parametrize("index", range(0, 90, 3))
def test_any_flipped_bit_is_detected(index: int) -> None:
    line = bytearray(encode_record(1, 2, Position(3, 4), False, b'{"id":1}',
                                   b'{"op":"c","after":{"id":1,"n":"x"}}')[:-1])
    line[index % len(line)] ^= 0x04
    with pytest.raises(RecordFormatError):
        decode_record(bytes(line), "t", 0)
