"""Whatever bytes arrive, the decoder raises DecodeError and nothing else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.capture.pgoutput import PgOutputDecoder
from cdc.errors import DecodeError

from . import wire
from .wire import ORDERS, ORDERS_COLUMNS, ORDERS_OID

XID = 731
ROW: list[wire.Value] = ["42", "7", "paid", "12.50", None, "2026-11-21 10:00:00+00"]
KEY: list[wire.Value] = ["42", None, None, None, None, None]
TOASTED: list[wire.Value] = ["42", "7", "paid", "12.50", ("u",), "x"]


def valid_messages(xid: int | None) -> list[bytes]:
    """One valid message of every kind that may appear inside (xid) or outside a stream."""
    common = [
        wire.origin(5, "origin"),
        wire.relation(ORDERS_OID, "public", "orders", ORDERS_COLUMNS, xid=xid),
        wire.type_message(16400, "public", "mood", xid=xid),
        wire.insert(ORDERS_OID, ROW, xid=xid),
        wire.insert(ORDERS_OID, ["1", b"\x00\x01", None, ("u",), "", "z"], xid=xid),
        wire.update(ORDERS_OID, ROW, xid=xid),
        wire.update(ORDERS_OID, ROW, old=KEY, kind=b"K", xid=xid),
        wire.update(ORDERS_OID, TOASTED, old=ROW, kind=b"O", xid=xid),
        wire.delete(ORDERS_OID, KEY, xid=xid),
        wire.delete(ORDERS_OID, ROW, kind=b"O", xid=xid),
        wire.truncate([ORDERS_OID], 3, xid=xid),
        wire.message("prefix", b"content\x00", 9, xid=xid),
    ]
    if xid is not None:
        return [*common, wire.stream_stop()]
    return [*common, wire.begin(1, 2, 3), wire.commit(1, 2, 3), wire.stream_commit(1, 2, 3, 4),
            wire.stream_abort(1, 2), wire.stream_start(9, True)]


def fresh_decoder(in_stream: bool) -> PgOutputDecoder:
    decoder = PgOutputDecoder(proto_version=2)
    decoder.decode(ORDERS)
    if in_stream:
        decoder.decode(wire.stream_start(XID, first_segment=True))
    return decoder


def decode_or_decode_error(decoder: PgOutputDecoder, payload: bytes) -> None:
    try:
        decoder.decode(payload)
    except DecodeError as error:
        assert isinstance(error.message_type, str) and error.message_type
        assert 0 <= error.offset <= len(payload)
        assert error.reason
        assert not error.reason.startswith("malformed message"), "a bounds check is missing"


@st.composite
def mutated(draw: st.DrawFn, in_stream: bool) -> bytes:
    payload = bytearray(draw(st.sampled_from(valid_messages(XID if in_stream else None))))
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        at = draw(st.integers(0, max(len(payload) - 1, 0)))
        if how == "flip" and payload:
            payload[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "set" and payload:
            payload[at] = draw(st.sampled_from([0, 0x7F, 0x80, 0xFF, ord("n"), ord("u"),
                                                ord("t"), ord("b"), ord("N")]))
        elif how == "cut":
            del payload[at:]
        elif how == "insert":
            payload[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif payload:
            del payload[at:at + draw(st.integers(1, 8))]
    return bytes(payload)


def test_every_valid_message_decodes() -> None:
    for in_stream in (False, True):
        for payload in valid_messages(XID if in_stream else None):
            fresh_decoder(in_stream).decode(payload)


@settings(max_examples=1000)
@given(payload=st.binary(max_size=120), in_stream=st.booleans())
def test_random_bytes_raise_only_decode_error(payload: bytes, in_stream: bool) -> None:
    decode_or_decode_error(fresh_decoder(in_stream), payload)


@settings(max_examples=2000)
@given(data=st.data(), in_stream=st.booleans())
def test_mutated_messages_raise_only_decode_error(data: st.DataObject, in_stream: bool) -> None:
    payload = data.draw(mutated(in_stream))
    decode_or_decode_error(fresh_decoder(in_stream), payload)


@settings(max_examples=300)
@given(prefix=st.sampled_from(b"BCORYIUDTMSEcA"), tail=st.binary(max_size=60),
       in_stream=st.booleans())
def test_known_types_with_random_bodies_raise_only_decode_error(
        prefix: int, tail: bytes, in_stream: bool) -> None:
    decode_or_decode_error(fresh_decoder(in_stream), bytes([prefix]) + tail)
