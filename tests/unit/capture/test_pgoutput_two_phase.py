"""Two-phase decoding (protocol 3): the prepared-transaction messages' layouts, and what
the assembler makes of them — one transaction at COMMIT PREPARED, nothing at ROLLBACK
PREPARED, no acknowledgement past a PREPARE whose outcome has not come."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.capture.pgoutput import (
    Begin,
    BeginPrepare,
    Commit,
    CommitPrepared,
    Insert,
    PgOutputDecoder,
    Prepare,
    RollbackPrepared,
    StreamAbort,
    StreamPrepare,
    StreamStart,
    StreamStop,
)
from cdc.capture.stream.replication import protocol_version
from cdc.capture.stream.transactions import TransactionAssembler
from cdc.errors import DecodeError

from . import wire
from .test_capture_fidelity import _assembler, _relation
from .wire import ORDERS_OID

XID = 0xFFFFFF01
GID = "order-7 ✓"
ROW: list[wire.Value] = ["1", "2", "s", "1.0", None, "2026-01-01 00:00:00+00"]


# -- layouts ------------------------------------------------------------------------------
def test_a_prepared_transaction_from_begin_prepare_to_commit_prepared() -> None:
    decoder = PgOutputDecoder(proto_version=3)
    payload = wire.begin_prepare(0x16B3000, 0x16B3100, -7, XID, GID)
    assert decoder.decode(payload) == BeginPrepare(0x16B3000, 0x16B3100, -7, XID, GID)
    decoder.decode(wire.ORDERS)
    assert decoder.decode(wire.insert(ORDERS_OID, ROW)) == Insert(  # no xid: not streamed
        ORDERS_OID, wire.expected(ROW), xid=None)
    assert decoder.decode(wire.prepare(0x16B3000, 0x16B3100, -7, XID, GID)) == Prepare(
        0x16B3000, 0x16B3100, -7, XID, GID, flags=0)
    payload = wire.commit_prepared((1 << 64) - 1, 0x16B4000, 123, XID, GID)
    assert decoder.decode(payload) == CommitPrepared(0, (1 << 64) - 1, 0x16B4000, 123, XID,
                                                     GID)


def test_rollback_prepared_and_stream_prepare() -> None:
    decoder = PgOutputDecoder(proto_version=4)
    payload = wire.rollback_prepared(0x100, 0x200, 5, 6, XID, "g")
    assert decoder.decode(payload) == RollbackPrepared(0, 0x100, 0x200, 5, 6, XID, "g")
    assert decoder.decode(wire.stream_start(XID, first_segment=True)) == StreamStart(XID, True)
    decoder.decode(wire.stream_stop())
    payload = wire.stream_prepare(0x300, 0x380, 9, XID, "")
    assert decoder.decode(payload) == StreamPrepare(0x300, 0x380, 9, XID, "", flags=0)


@pytest.mark.parametrize("payload", [
    wire.begin_prepare(1, 2, 3, 4, "g"), wire.prepare(1, 2, 3, 4, "g"),
    wire.commit_prepared(1, 2, 3, 4, "g"), wire.rollback_prepared(1, 2, 3, 4, 5, "g"),
    wire.stream_prepare(1, 2, 3, 4, "g")])
def test_two_phase_messages_need_protocol_3(payload: bytes) -> None:
    with pytest.raises(DecodeError, match="unknown message type"):
        PgOutputDecoder(proto_version=2).decode(payload)


@pytest.mark.parametrize(("payload", "message_type"), [
    (wire.begin_prepare(1, 2, 3, 4, "g")[:-1], "Begin Prepare"),  # no NUL after the gid
    (wire.prepare(1, 2, 3, 4, "g")[:20], "Prepare"),
    (wire.commit_prepared(1, 2, 3, 4, "g") + b"x", "Commit Prepared"),
    (wire.rollback_prepared(1, 2, 3, 4, 5, "g")[:30], "Rollback Prepared"),
    (wire.stream_prepare(1, 2, 3, 4, "g")[:1], "Stream Prepare")])
def test_malformed_two_phase_messages(payload: bytes, message_type: str) -> None:
    with pytest.raises(DecodeError) as caught:
        PgOutputDecoder(proto_version=3).decode(payload)
    assert caught.value.message_type == message_type
    assert 0 <= caught.value.offset <= len(payload)


def test_prepare_messages_inside_a_stream_block_are_refused() -> None:
    decoder = PgOutputDecoder(proto_version=3)
    decoder.decode(wire.stream_start(XID, first_segment=True))
    with pytest.raises(DecodeError, match="inside a stream block"):
        decoder.decode(wire.stream_prepare(1, 2, 3, XID, "g"))


def test_the_highest_protocol_each_version_speaks() -> None:
    assert [protocol_version(v) for v in range(13, 19)] == [1, 2, 3, 4, 4, 4]


# -- the assembler --------------------------------------------------------------------------
PREPARE_LSN, PREPARE_END = 0x1000, 0x1040
COMMIT_LSN, COMMIT_END, COMMIT_TS = 0x5000, 0x5040, 86_400_000_000  # 2000-01-02


def _prepared(assembler: TransactionAssembler, xid: int = 9, rows: int = 3,
              lsn: int = PREPARE_LSN) -> None:
    assembler.feed(BeginPrepare(lsn, lsn + 0x40, 0, xid, f"g{xid}"), lsn - 0x100)
    assembler.feed(_relation(7), lsn - 0xF0)
    for n in range(rows):
        assembler.feed(Insert(7, (str(n), "1.5")), lsn - 0xE0 + n)
    assembler.feed(Prepare(lsn, lsn + 0x40, 0, xid, f"g{xid}", flags=0), lsn)


def _events(assembler: TransactionAssembler) -> list[dict[str, Any]]:
    return [orjson.loads(r.value) for r in assembler.ready if not r.topic.endswith("_schemas")]


def _drain(assembler: TransactionAssembler, limit: int = 1000) -> None:
    while assembler.draining:
        assembler.drain(limit)


def test_prepare_then_commit_prepared_is_one_transaction_at_the_commit(tmp_path: Path) -> None:
    assembler = _assembler(tmp_path)
    _prepared(assembler)
    assert _events(assembler) == [], "nothing before COMMIT PREPARED"
    assert assembler.transaction is None, "the native path must not take its rows"
    assert not assembler.idle
    assembler.feed(CommitPrepared(0, COMMIT_LSN, COMMIT_END, COMMIT_TS, 9, "g9"), COMMIT_LSN)
    _drain(assembler)
    events = _events(assembler)
    assert [e["after"]["id"] for e in events] == [0, 1, 2]
    assert {(e["source"]["commit_lsn"], e["source"]["txid"], e["source"]["commit_ts"])
            for e in events} == {("0/5000", 9, "2000-01-02T00:00:00.000000Z")}
    assert [e["source"]["seq"] for e in events] == [0, 1, 2]
    records = [r for r in assembler.ready if not r.topic.endswith("_schemas")]
    assert [(r.position.commit_lsn, r.position.seq) for r in records] == [
        (COMMIT_LSN, 0), (COMMIT_LSN, 1), (COMMIT_LSN, 2)]
    assert assembler.ack_lsn == COMMIT_END
    assert assembler.idle and assembler.spool.open_transactions() == 0


def test_rollback_prepared_leaves_nothing(tmp_path: Path) -> None:
    assembler = _assembler(tmp_path)
    _prepared(assembler)
    assembler.feed(RollbackPrepared(0, PREPARE_END, 0x6040, 0, 1, 9, "g9"), 0x6000)
    _drain(assembler)
    assert _events(assembler) == []
    assert assembler.ack_lsn == 0x6040
    assert assembler.idle and assembler.spool.open_transactions() == 0


def test_no_acknowledgement_past_a_prepare_whose_outcome_is_pending(tmp_path: Path) -> None:
    assembler = _assembler(tmp_path)
    _prepared(assembler)
    assert assembler.ack_lsn <= PREPARE_LSN
    # other transactions commit meanwhile: their events go out, the ack stays held
    assembler.feed(Begin(0x2000, 0, 20), 0x1F00)
    assembler.feed(Insert(7, ("100", "2.0")), 0x1F10)
    assembler.feed(Commit(0, 0x2000, 0x2040, 0), 0x2000)
    assert [e["after"]["id"] for e in _events(assembler)] == [100]
    assert assembler.ack_lsn == PREPARE_LSN
    assembler.ack_lsn = 0x3000  # the runner's keepalive rule: only when idle, capped anyway
    assert assembler.ack_lsn == PREPARE_LSN
    # while the committed prepared transaction is handed out, still held
    assembler.feed(CommitPrepared(0, COMMIT_LSN, COMMIT_END, COMMIT_TS, 9, "g9"), COMMIT_LSN)
    assembler.drain(1)
    assert assembler.draining and assembler.ack_lsn == PREPARE_LSN
    _drain(assembler, 1)
    assert assembler.ack_lsn == COMMIT_END


def test_the_oldest_pending_prepare_holds_the_acknowledgement(tmp_path: Path) -> None:
    assembler = _assembler(tmp_path)
    _prepared(assembler, xid=9, lsn=0x1000)
    _prepared(assembler, xid=10, lsn=0x2000)
    assembler.feed(CommitPrepared(0, 0x3000, 0x3040, 0, 10, "g10"), 0x3000)
    _drain(assembler)
    assert assembler.ack_lsn == 0x1000
    assembler.feed(RollbackPrepared(0, 0x1040, 0x4040, 0, 0, 9, "g9"), 0x4000)
    assert assembler.ack_lsn == 0x4040
    assert [e["source"]["txid"] for e in _events(assembler)] == [10, 10, 10]


def test_a_streamed_transaction_prepared_then_committed(tmp_path: Path) -> None:
    assembler = _assembler(tmp_path)
    assembler.feed(StreamStart(30, True), 0x100)
    assembler.feed(_relation(7), 0x108)  # the relation of a stream block carries its xid
    assembler.feed(Insert(7, ("1", "1.0"), xid=30), 0x110)
    assembler.feed(Insert(7, ("2", "1.0"), xid=31), 0x118)  # a subtransaction, aborted below
    assembler.feed(StreamStop(), 0x120)
    assembler.feed(StreamAbort(30, 31), 0x128)
    assembler.feed(StreamPrepare(0x200, 0x240, 0, 30, "s", flags=0), 0x200)
    assert _events(assembler) == [] and assembler.ack_lsn <= 0x200
    assembler.feed(CommitPrepared(0, 0x900, 0x940, 0, 30, "s"), 0x900)
    _drain(assembler)
    assert [(e["after"]["id"], e["source"]["commit_lsn"]) for e in _events(assembler)] == [
        (1, "0/900")]
    assert assembler.ack_lsn == 0x940


def test_a_streamed_prepared_transaction_rolled_back(tmp_path: Path) -> None:
    assembler = _assembler(tmp_path)
    assembler.feed(StreamStart(30, True), 0x100)
    assembler.feed(_relation(7), 0x108)
    assembler.feed(Insert(7, ("1", "1.0"), xid=30), 0x110)
    assembler.feed(StreamStop(), 0x120)
    assembler.feed(StreamPrepare(0x200, 0x240, 0, 30, "s", flags=0), 0x200)
    assembler.feed(RollbackPrepared(0, 0x240, 0x340, 0, 0, 30, "s"), 0x300)
    assert _events(assembler) == [] and assembler.idle and assembler.ack_lsn == 0x340


def test_commit_prepared_of_an_unknown_transaction_is_empty(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assembler = _assembler(tmp_path)
    assembler.feed(CommitPrepared(0, 0x900, 0x940, 0, 44, "lost"), 0x900)
    _drain(assembler)
    assert _events(assembler) == [] and assembler.ack_lsn == 0x940
    assert "'lost'" in caplog.text
