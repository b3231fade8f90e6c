"""The capture's batched native path against the Python reference: the CopyData
messages of the replication stream as received, taken by ``NativeChanges.feed_batch``
for as long as it can and decoded one by one for the rest, leave the
same records (byte for byte), ``ack_lsn``, open transaction and errors as every
message decoded and fed one by one.

Streams mix normal transactions (Begin, random row changes of ``test_native_dml``'s
random tables, Commit), empty ones, streamed transactions in one or more blocks
(committed, then drained), keepalives and a table's Relation sent again with another
shape; they are cut into batches at random.
"""

from __future__ import annotations

import itertools
import struct
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cdc.capture.stream.native import NativeChanges
from cdc.capture.stream.replication import Keepalive, XLogData, parse_copy_message
from cdc.capture.stream.transactions import TransactionAssembler
from cdc.log import Record

from . import wire
from .test_native_dml import CHECKS, KEEPS_SHAPES, _relation, _session, changes, insert, tables
from .test_native_stream import streamed

YEAR_1 = -63_082_281_600_000_000  # 0001-01-01 in pgoutput's clock (µs since 2000)
YEAR_10000 = 252_455_616_000_000_000


def keepalive(lsn: int) -> bytes:
    return b"k" + struct.pack(">QqB", lsn, 0, 0)


State = tuple[list[Record], int, object, object]


def _state(assembler: TransactionAssembler, error: object) -> State:
    transaction = assembler.transaction
    opened = None if transaction is None else (transaction.commit, transaction.seq)
    return assembler.ready, assembler.ack_lsn, opened, error


def reference(tmp_path: Path, raw: list[bytes]) -> State:
    decoder, assembler = _session(tmp_path, "ref")
    try:
        for data in raw:
            message = parse_copy_message(memoryview(data))
            if isinstance(message, Keepalive):
                continue
            assembler.feed(decoder.decode(bytes(message.payload)), message.start_lsn)
            while assembler.draining:
                assembler.drain(3)
    except Exception as exc:  # compared, not hidden
        return _state(assembler, (type(exc), str(exc)))
    return _state(assembler, None)


def batched(tmp_path: Path, raw: list[bytes], cuts: list[int]) -> State:
    """As the runner: ``feed_batch`` first, the per-message path for what it leaves."""
    decoder, assembler = _session(tmp_path, "fast")
    native = NativeChanges(decoder, assembler)
    bounds = sorted({0, len(raw), *cuts})
    try:
        for low, high in itertools.pairwise(bounds):
            batch = [memoryview(data) for data in raw[low:high]]
            index = 0
            while index < len(batch):
                index = native.feed_batch(batch, index, begins=True)
                if index >= len(batch):
                    break
                message = parse_copy_message(batch[index])
                index += 1
                if isinstance(message, Keepalive):
                    continue
                decoded = decoder.decode(bytes(message.payload))
                assembler.feed(decoded, message.start_lsn)
                if not isinstance(decoded, KEEPS_SHAPES):
                    native.forget_tables()
                while assembler.draining:
                    native.drain(3, 1 << 30)
    except Exception as exc:  # compared, not hidden
        return _state(assembler, (type(exc), str(exc)))
    return _state(assembler, None)


@st.composite
def streams(draw: st.DrawFn) -> list[bytes]:
    table = draw(tables())
    payloads = [_relation(table)]
    xid = 700
    lsn = 1 << 32
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["tx", "tx", "tx", "empty", "stream", "relation",
                                     "keepalive"]))
        xid += 3
        lsn += 0x1000
        body = [payload for payload, _ in draw(st.lists(changes(table), max_size=6))]
        if kind == "tx" or kind == "empty":
            # commit times of any year, and past the years Python's datetime has
            commit_ts = draw(st.one_of(st.integers(-2**63, 2**63 - 1),
                                       st.integers(YEAR_1 - 1, YEAR_10000)))
            payloads += [wire.begin(lsn, commit_ts, xid),
                         *(body if kind == "tx" else []),
                         wire.commit(lsn, lsn + 8, commit_ts)]
        elif kind == "stream":
            payloads.append(wire.stream_start(xid, True))
            for index, payload in enumerate(body):
                if index and draw(st.integers(0, 3)) == 0:
                    payloads += [wire.stream_stop(), wire.stream_start(xid, False)]
                payloads.append(streamed(payload, draw(st.sampled_from([xid, xid + 1]))))
            payloads.append(wire.stream_stop())
            if draw(st.booleans()):
                payloads.append(wire.stream_abort(xid, xid + 1))
            payloads.append(wire.stream_commit(xid, lsn, lsn + 8, 7_000_000 + xid))
        elif kind == "relation":
            payloads.append(_relation(draw(tables())))
        else:
            payloads.append(b"")  # a keepalive, below
    raw = []
    for index, payload in enumerate(payloads):
        at = (1 << 32) + 0x10 * (index + 1)
        raw.append(keepalive(at) if payload == b"" else wire.xlog(payload, at))
    return raw


@CHECKS
@given(st.data())
def test_batches_leave_what_the_reference_leaves(tmp_path_factory: Any,
                                                 data: st.DataObject) -> None:
    raw = data.draw(streams())
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=4))
    expected = reference(tmp_path_factory.mktemp("r"), raw)
    actual = batched(tmp_path_factory.mktemp("b"), raw, cuts)
    assert actual == expected
    assert all(type(r) is Record for r in actual[0])


def test_plain_transactions_are_taken_in_one_call(tmp_path: Path) -> None:
    table = [("id", 20, True), ("note", 25, False)]
    payloads = [_relation(table)]
    for xid in range(3):
        lsn = (2 << 32) + 0x100 * xid
        payloads += [wire.begin(lsn, 8_000_000 + xid, 50 + xid),
                     insert([str(xid).encode(), b"a"]), insert([str(xid + 9).encode(), None]),
                     wire.commit(lsn, lsn + 8, 8_000_000 + xid)]
    payloads.append(wire.begin((3 << 32), 9_000_000, 99))
    payloads.append(insert([b"77", b"open"]))
    raw = [wire.xlog(p, (1 << 32) + 0x10 * (i + 1)) for i, p in enumerate(payloads)]
    decoder, assembler = _session(tmp_path, "s")
    native = NativeChanges(decoder, assembler)
    batch = [memoryview(r) for r in raw]
    assert native.feed_batch(batch, 0, begins=True) == 0  # the Relation: Python's
    relation = parse_copy_message(batch[0])
    assert isinstance(relation, XLogData)
    assembler.feed(decoder.decode(bytes(relation.payload)), relation.start_lsn)
    native.forget_tables()
    # the rest in one call: the first Insert's table is new, learned on the way
    assert native.feed_batch(batch, 1, begins=True) == len(batch)
    expected = reference(tmp_path / "ref", raw)
    assert _state(assembler, None) == expected
    assert len(assembler.ready) == 1 + 2 * 3 + 1
    assert assembler.transaction is not None and assembler.transaction.seq == 1
