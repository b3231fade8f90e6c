"""Malformed pgoutput bytes: each raises DecodeError naming the message type and offset."""

from __future__ import annotations

import struct

import pytest

from cdc.capture.pgoutput import PgOutputDecoder
from cdc.errors import DecodeError, TerminalError

from . import wire
from .wire import ORDERS, ORDERS_OID

ROW: list[wire.Value] = ["1", "2", "s", "1.0", None, "t"]


def decode_error(payload: bytes, proto_version: int = 2) -> DecodeError:
    decoder = PgOutputDecoder(proto_version)
    decoder.decode(ORDERS)
    with pytest.raises(DecodeError) as caught:
        decoder.decode(payload)
    error = caught.value
    assert 0 <= error.offset <= len(payload)
    return error


def test_decode_error_is_terminal_and_readable() -> None:
    error = decode_error(b"Z")
    assert isinstance(error, TerminalError)
    assert (error.message_type, error.offset) == ("Z", 0)
    assert "unknown message type" in str(error)


def test_empty_payload() -> None:
    assert decode_error(b"").message_type == "empty"


def test_unprintable_message_type() -> None:
    assert decode_error(b"\x00abc").message_type == "0x00"


@pytest.mark.parametrize("cut", [1, 5, 9, 10, 12, 20])
def test_truncated_insert(cut: int) -> None:
    payload = wire.insert(ORDERS_OID, ROW)
    error = decode_error(payload[:cut])
    assert error.message_type == "Insert"
    assert error.offset <= cut


def test_truncated_begin_and_commit() -> None:
    assert decode_error(wire.begin(1, 2, 3)[:-1]).message_type == "Begin"
    assert decode_error(wire.commit(1, 2, 3) + b"\0").message_type == "Commit"


def test_unknown_tuple_kind_points_at_the_kind_byte() -> None:
    payload = wire.insert(ORDERS_OID, ROW)
    position = payload.index(b"n", 6)  # the NULL column's kind byte
    error = decode_error(payload[:position] + b"x" + payload[position + 1:])
    assert error.offset == position
    assert "unknown tuple value kind 'x'" in error.reason


def test_value_length_overrunning_the_message() -> None:
    payload = bytearray(wire.insert(ORDERS_OID, ROW))
    struct.pack_into(">i", payload, 9, 1000)  # first column's length (after I, oid, N, count)
    error = decode_error(bytes(payload))
    assert error.offset == 9
    assert "overruns" in error.reason


def test_negative_value_length() -> None:
    payload = bytearray(wire.insert(ORDERS_OID, ROW))
    struct.pack_into(">i", payload, 9, -1)
    assert "length -1" in decode_error(bytes(payload)).reason


def test_column_count_not_matching_the_relation() -> None:
    error = decode_error(wire.insert(ORDERS_OID, ["1"]))
    assert error.offset == 6
    assert "has 6" in error.reason


def test_unknown_relation_oid() -> None:
    error = decode_error(wire.insert(ORDERS_OID + 1, ROW))
    assert error.message_type == "Insert"
    assert "no Relation" in error.reason
    assert decode_error(wire.truncate([ORDERS_OID, 77])).message_type == "Truncate"
    assert decode_error(wire.update(77, ROW)).message_type == "Update"
    assert decode_error(wire.delete(77, ROW)).message_type == "Delete"


def test_trailing_bytes() -> None:
    error = decode_error(wire.insert(ORDERS_OID, ROW) + b"\0\0")
    assert "2 unexpected bytes" in error.reason


def test_wrong_tuple_markers() -> None:
    insert = wire.insert(ORDERS_OID, ROW)
    assert decode_error(insert[:5] + b"K" + insert[6:]).offset == 5
    assert "'K', 'O' or 'N'" in decode_error(wire.update(ORDERS_OID, ROW, ROW, b"X")).reason
    assert "'K' or 'O'" in decode_error(wire.delete(ORDERS_OID, ROW, b"N")).reason


def test_truncate_count_not_matching_its_oids() -> None:
    payload = bytearray(wire.truncate([ORDERS_OID]))
    struct.pack_into(">i", payload, 1, 0x40000000)
    assert "bytes, 4 are left" in decode_error(bytes(payload)).reason


def test_relation_column_count_too_large() -> None:
    payload = bytearray(wire.relation(5, "s", "t", [(0, "a", 23, -1)]))
    struct.pack_into(">h", payload, 1 + 4 + 2 + 2 + 1, 5000)
    error = decode_error(bytes(payload))
    assert error.message_type == "Relation"
    assert "does not fit" in error.reason


def test_unterminated_string() -> None:
    payload = wire.type_message(16400, "public", "mood")[:-1]
    error = decode_error(payload)
    assert (error.message_type, error.reason) == ("Type", "truncated: type name has no "
                                                          "terminating NUL")


def test_logical_message_length_mismatch() -> None:
    payload = wire.message("p", b"content", 1)
    assert "does not match" in decode_error(payload[:-1]).reason
