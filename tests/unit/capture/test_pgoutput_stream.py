"""Protocol 2 streaming: stream blocks, the xid prefix inside them, commit and abort."""

from __future__ import annotations

import pytest

from cdc.capture.pgoutput import (
    Delete,
    Insert,
    LogicalMessage,
    Origin,
    PgOutputDecoder,
    Relation,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
    Truncate,
    TypeMsg,
    Update,
)
from cdc.errors import DecodeError

from . import wire
from .wire import ORDERS_COLUMNS, ORDERS_OID

XID = 0xFFFFFF01
ROW: list[wire.Value] = ["1", "2", "s", "1.0", None, "2026-01-01 00:00:00+00"]


def test_a_streamed_transaction_from_start_to_commit() -> None:
    decoder = PgOutputDecoder(proto_version=2)
    assert decoder.decode(wire.stream_start(XID, first_segment=True)) == StreamStart(XID, True)
    assert decoder.in_stream
    assert decoder.decode(wire.origin(7, "up")) == Origin(7, "up")
    assert decoder.decode(wire.type_message(16400, "public", "mood", xid=XID)) == TypeMsg(
        16400, "public", "mood", xid=XID)
    relation = decoder.decode(wire.relation(ORDERS_OID, "public", "orders", ORDERS_COLUMNS,
                                            xid=XID))
    assert isinstance(relation, Relation)
    assert relation.xid == XID
    assert decoder.decode(wire.insert(ORDERS_OID, ROW, xid=XID)) == Insert(
        ORDERS_OID, wire.expected(ROW), xid=XID)
    assert decoder.decode(wire.update(ORDERS_OID, ROW, old=ROW, kind=b"O", xid=XID)) == Update(
        ORDERS_OID, "O", wire.expected(ROW), wire.expected(ROW), xid=XID)
    key: list[wire.Value] = ["1", None, None, None, None, None]
    assert decoder.decode(wire.delete(ORDERS_OID, key, xid=XID)) == Delete(
        ORDERS_OID, "K", wire.expected(key), xid=XID)
    assert decoder.decode(wire.truncate([ORDERS_OID], 3, xid=XID)) == Truncate(
        (ORDERS_OID,), True, True, xid=XID)
    assert decoder.decode(wire.message("p", b"c", 5, xid=XID)) == LogicalMessage(
        True, 5, "p", b"c", xid=XID)
    assert decoder.decode(wire.stream_stop()) == StreamStop()
    assert not decoder.in_stream
    assert decoder.decode(wire.stream_start(XID, first_segment=False)) == StreamStart(XID, False)
    assert decoder.decode(wire.stream_stop()) == StreamStop()
    payload = wire.stream_commit(XID, commit_lsn=100, end_lsn=200, commit_ts=-1)
    assert decoder.decode(payload) == StreamCommit(0, 100, 200, -1, xid=XID)


def test_stream_abort_of_a_subtransaction() -> None:
    decoder = PgOutputDecoder(proto_version=2)
    assert decoder.decode(wire.stream_abort(XID, XID + 1)) == StreamAbort(XID, XID + 1)


def test_stream_abort_with_parallel_apply_fields_in_protocol_4() -> None:
    decoder = PgOutputDecoder(proto_version=4)
    payload = wire.stream_abort(XID, XID, abort_lsn=1 << 40, abort_ts=12345)
    assert decoder.decode(payload) == StreamAbort(XID, XID, 1 << 40, 12345)
    assert decoder.decode(wire.stream_abort(XID, XID)) == StreamAbort(XID, XID)


def test_abort_fields_are_not_accepted_before_protocol_4() -> None:
    payload = wire.stream_abort(XID, XID, abort_lsn=1, abort_ts=2)
    with pytest.raises(DecodeError) as caught:
        PgOutputDecoder(proto_version=2).decode(payload)
    assert caught.value.message_type == "Stream Abort"


def test_the_same_bytes_mean_a_different_message_inside_a_stream() -> None:
    decoder = PgOutputDecoder(proto_version=2)
    decoder.decode(wire.relation(ORDERS_OID, "public", "orders", ORDERS_COLUMNS))
    plain = wire.insert(ORDERS_OID, ROW)
    decoder.decode(wire.stream_start(XID, first_segment=True))
    with pytest.raises(DecodeError) as caught:
        decoder.decode(plain)  # the OID is read as the xid, then garbage follows
    assert caught.value.message_type == "Insert"


def test_streaming_messages_are_unknown_in_protocol_1() -> None:
    with pytest.raises(DecodeError) as caught:
        PgOutputDecoder(proto_version=1).decode(wire.stream_start(XID, first_segment=True))
    assert (caught.value.message_type, caught.value.offset) == ("S", 0)


@pytest.mark.parametrize(("payload", "name"), [
    (wire.stream_start(XID, first_segment=True), "Stream Start"),
    (wire.begin(1, 2, 3), "Begin"),
    (wire.commit(1, 2, 3), "Commit"),
    (wire.stream_commit(XID, 1, 2, 3), "Stream Commit"),
    (wire.stream_abort(XID, XID), "Stream Abort"),
])
def test_out_of_order_messages_inside_a_stream(payload: bytes, name: str) -> None:
    decoder = PgOutputDecoder(proto_version=2)
    decoder.decode(wire.stream_start(XID, first_segment=True))
    with pytest.raises(DecodeError) as caught:
        decoder.decode(payload)
    assert caught.value.message_type == name
    assert decoder.in_stream


def test_stream_stop_outside_a_stream() -> None:
    with pytest.raises(DecodeError) as caught:
        PgOutputDecoder(proto_version=2).decode(wire.stream_stop())
    assert caught.value.message_type == "Stream Stop"


def test_rejected_proto_version() -> None:
    with pytest.raises(ValueError, match="proto_version"):
        PgOutputDecoder(proto_version=0)
