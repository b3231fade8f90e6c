"""The wire primitives pgoutput messages are made of (TupleData, C strings) and the
bounds checks every read goes through.

Every read checks its bounds first, so malformed input raises ``DecodeError`` with the
offset where it went wrong rather than ``struct.error`` or ``IndexError``. This is the hot
path of the capture: one precompiled ``struct.Struct`` per shape, ``unpack_from`` on the
payload's bytes, and a loop per column (never per byte).
"""

from __future__ import annotations

import struct

from cdc.errors import DecodeError

from .messages import UNCHANGED_TOAST, TupleValue

_U16 = struct.Struct(">H")
_KIND_LENGTH = struct.Struct(">Bi")

_NULL = 0x6E  # 'n'
_TOAST = 0x75  # 'u'
_TEXT = 0x74  # 't'
_BINARY = 0x62  # 'b'


def read_tuple(data: bytes, pos: int, end: int, message_type: str,
               columns: int) -> tuple[tuple[TupleValue, ...], int]:
    """TupleData at ``pos`` with exactly ``columns`` values; returns it and the next offset."""
    if pos + 2 > end:
        raise DecodeError(message_type, pos, "truncated: no column count for the tuple")
    (count,) = _U16.unpack_from(data, pos)
    if count != columns:
        raise DecodeError(message_type, pos, f"tuple has {count} columns, the relation "
                                             f"has {columns}")
    pos += 2
    values: list[TupleValue] = []
    append = values.append
    unpack = _KIND_LENGTH.unpack_from
    last = end - 5  # a kind byte and a length fit from here on
    for _ in range(count):
        if pos <= last:
            kind, length = unpack(data, pos)
        elif pos < end:
            kind, length = data[pos], -1
        else:
            raise DecodeError(message_type, pos, f"truncated: tuple ends after {len(values)} "
                                                 f"of {count} columns")
        if kind == _TEXT:
            pos += 5
            stop = pos + length
            if length < 0 or stop > end:
                raise _bad_length(message_type, pos, end, length)
            append(data[pos:stop].decode("utf-8", "surrogateescape"))
            pos = stop
        elif kind == _NULL:
            append(None)
            pos += 1
        elif kind == _TOAST:
            append(UNCHANGED_TOAST)
            pos += 1
        elif kind == _BINARY:
            pos += 5
            stop = pos + length
            if length < 0 or stop > end:
                raise _bad_length(message_type, pos, end, length)
            append(data[pos:stop])
            pos = stop
        else:
            raise DecodeError(message_type, pos, f"unknown tuple value kind {_char(kind)}")
    return tuple(values), pos


def _bad_length(message_type: str, pos: int, end: int, length: int) -> DecodeError:
    if pos > end:
        return DecodeError(message_type, end, "truncated: no length for a column value")
    return DecodeError(message_type, pos - 4, f"column value length {length} overruns the "
                                              f"message ({end - pos} bytes left)")


def read_cstring(data: bytes, pos: int, message_type: str, what: str) -> tuple[str, int]:
    """The NUL-terminated string at ``pos`` and the offset after its NUL."""
    nul = data.find(b"\0", pos)
    if nul < 0:
        raise DecodeError(message_type, min(pos, len(data)),
                          f"truncated: {what} has no terminating NUL")
    return data[pos:nul].decode("utf-8", "surrogateescape"), nul + 1


def _char(byte: int) -> str:
    return repr(chr(byte)) if 0x20 <= byte < 0x7F else f"0x{byte:02x}"


def type_name(byte: int) -> str:
    """How a DecodeError names a message type byte nobody knows."""
    return chr(byte) if 0x20 <= byte < 0x7F else f"0x{byte:02x}"


def need(message_type: str, pos: int, end: int, size: int, what: str) -> None:
    """Raise unless ``size`` bytes (the ``what``) are left at ``pos``."""
    if pos + size > end:
        raise truncated(message_type, pos, end, what)


def truncated(message_type: str, pos: int, end: int, what: str) -> DecodeError:
    """The error for a message that ends before its ``what``."""
    return DecodeError(message_type, min(pos, end),
                       f"truncated: no room for the {what} ({max(end - pos, 0)} bytes left)")


def expect_size(message_type: str, end: int, size: int) -> None:
    """Raise unless a fixed-size message is exactly ``size`` bytes."""
    if end != size:
        raise DecodeError(message_type, min(end, size),
                          f"message is {end} bytes, expected {size}")


def expect_end(message_type: str, pos: int, end: int) -> None:
    """Raise if bytes are left after the last field."""
    if pos != end:
        raise trailing(message_type, pos, end)


def trailing(message_type: str, pos: int, end: int) -> DecodeError:
    """The error for bytes left after the last field."""
    return DecodeError(message_type, pos, f"{end - pos} unexpected bytes after the message")


def unknown_relation(message_type: str, oid: int, pos: int) -> DecodeError:
    """The error for a data message naming a relation no Relation message announced."""
    return DecodeError(message_type, pos, f"relation OID {oid} has had no Relation message")
