"""Streamed transactions through the native core against the Python reference: row
changes inside stream blocks become the same spool frames (``feed_batch`` vs
``StreamSpool.add``), and at Stream Commit the spool becomes the same records
(``NativeChanges.drain`` vs ``TransactionAssembler.drain``), byte for byte, with the
same ``ack_lsn``; aborted subtransactions are left out by both. The random tables and
row changes are ``test_native_dml``'s; each change is sent in a stream block under the
top-level xid or a subtransaction's, in one or more blocks.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.capture.stream import native as dml_native
from cdc.capture.stream.native import NativeChanges
from cdc.capture.stream.transactions import TransactionAssembler
from cdc.log import Record
from cdc.native import CORE

from . import wire
from .test_native_dml import (
    CHECKS,
    OID,
    OTHER,
    _outcome,
    _relation,
    _session,
    changes,
    decode_into,
    feed_change,
    tables,
)

TOP = 900
COMMIT_LSN = (5 << 32) + 0x4000


def streamed(payload: bytes, xid: int) -> bytes:
    """A row change as sent inside a stream block: its xid after the type byte."""
    return payload[:1] + struct.pack(">I", xid) + payload[1:]


def drain_reference(assembler: TransactionAssembler, limit: int) -> list[list[Record]]:
    batches = []
    while assembler.draining:
        assembler.drain(limit)
        batches.append(assembler.ready)
        assembler.ready = []
    return batches


def drain_native(native: NativeChanges, limit: int, max_bytes: int) -> list[list[Record]]:
    assembler = native.assembler
    batches = []
    while assembler.draining:
        native.drain(limit, max_bytes)
        batch, assembler.ready = assembler.ready, []
        assert len(batch) <= limit
        assert len(batch) <= 1 or sum(len(r.value) for r in batch[:-1]) < max_bytes
        batches.append(batch)
    return batches


def run_stream(tmp_path: Path, payloads: list[bytes], limit: int,
               max_bytes: int) -> tuple[tuple[list[object], list[Record], int],
                                        tuple[list[object], list[Record], int], list[bool]]:
    """Both sessions take every payload, draining after the last (a Stream Commit):
    each one's outcomes per message, records in order and final ``ack_lsn``."""
    ref_decoder, ref = _session(tmp_path, "ref")
    decoder, assembler = _session(tmp_path, "native")
    native = NativeChanges(decoder, assembler)
    taken: list[bool] = []

    def reference(payload: bytes, lsn: int) -> None:
        ref.feed(ref_decoder.decode(payload), lsn)

    def fast(payload: bytes, lsn: int) -> None:
        took = feed_change(native, payload, lsn)
        taken.append(took)
        if not took:
            decode_into(native, payload, lsn)

    expected: list[object] = []
    actual: list[object] = []
    for index, payload in enumerate(payloads):
        lsn = (5 << 32) + 0x10 * (index + 1)
        expected.append(_outcome(reference, payload, lsn, ref))
        actual.append(_outcome(fast, payload, lsn, assembler))
    ref_records, ref.ready = ref.ready, []
    ref_records += [r for batch in drain_reference(ref, limit) for r in batch]
    records, assembler.ready = assembler.ready, []
    records += [r for batch in drain_native(native, limit, max_bytes) for r in batch]
    return ((expected, ref_records, ref.ack_lsn), (actual, records, assembler.ack_lsn), taken)


@CHECKS
@given(st.data())
def test_streamed_transactions_give_the_reference_records(
        tmp_path_factory: Any, data: st.DataObject) -> None:
    table = data.draw(tables())
    body = data.draw(st.lists(changes(table), min_size=1, max_size=10))
    subxids = data.draw(st.lists(st.sampled_from([TOP, TOP + 1, TOP + 2]),
                                 min_size=len(body), max_size=len(body)))
    cuts = data.draw(st.sets(st.integers(1, len(body) - 1), max_size=3)) if len(body) > 1 \
        else set()
    aborted = data.draw(st.sets(st.sampled_from([TOP + 1, TOP + 2])))
    payloads = [_relation(table), wire.stream_start(TOP, True)]
    for index, ((payload, _), xid) in enumerate(zip(body, subxids, strict=True)):
        if index in cuts:  # the server closes a block and opens the next
            payloads += [wire.stream_stop(), wire.stream_start(TOP, False)]
        payloads.append(streamed(payload, xid))
    payloads.append(wire.stream_stop())
    payloads += [wire.stream_abort(TOP, subxid) for subxid in sorted(aborted)]
    payloads.append(wire.stream_commit(TOP, COMMIT_LSN, COMMIT_LSN + 8, 7_000_123))
    limit = data.draw(st.integers(1, 12))
    max_bytes = data.draw(st.sampled_from([1, 200, 1 << 30]))
    saved = dml_native.SPOOL_CHUNK
    dml_native.SPOOL_CHUNK = data.draw(st.sampled_from([7, 64, 1 << 22]))  # frames split
    try:
        expected, actual, taken = run_stream(tmp_path_factory.mktemp("s"), payloads,
                                             limit, max_bytes)
    finally:
        dml_native.SPOOL_CHUNK = saved
    assert actual == expected
    for record in actual[1]:
        assert type(record) is Record
    clean = [payload for (payload, clean), xid in zip(body, subxids, strict=True) if clean]
    if clean and all(oid != OTHER for _, oid, _ in table):
        assert any(taken), "no streamed change was converted natively"


def test_a_plain_stream_is_converted_natively(tmp_path: Path) -> None:
    table = [("id", 20, True), ("note", 25, False)]
    rows = [streamed(b"I" + struct.pack(">I", OID) + b"N" + wire.tuple_data([str(i), "n"]),
                     TOP) for i in range(25)]
    payloads = [_relation(table), wire.stream_start(TOP, True), *rows, wire.stream_stop(),
                wire.stream_commit(TOP, COMMIT_LSN, COMMIT_LSN + 8, 7_000_123)]
    expected, actual, taken = run_stream(tmp_path, payloads, 10, 1 << 30)
    assert actual == expected
    assert taken == [False, False, *[True] * 25, False, False]
    schema, *records = actual[1]  # the table's schema record, then its rows
    assert schema.topic.endswith("_schemas")
    assert [r.position.seq for r in records] == list(range(25))
    assert actual[2] == COMMIT_LSN + 8
    assert not list((tmp_path / "native").iterdir())  # the spool file is gone


@pytest.mark.parametrize("cut", [1, 20, 37])
def test_a_spool_file_cut_inside_a_frame_is_an_error_naming_the_byte(cut: int) -> None:
    frame = (struct.pack(">IIIIIQ?", TOP, 3, 8, 2, 0, 0x10, False)
             + b"a.b" + b'{"id":1}' + b"{}")
    spool = io.BytesIO(frame + frame[:cut])
    ready: list[Record] = []
    commit = (b'"db"', COMMIT_LSN, b"0/900", b'"txid":1}}')
    with pytest.raises(ValueError, match=f"ends inside the frame at byte {len(frame)}"):
        CORE.spool_records(spool, b"", ready, 10, 1 << 20, set(), commit, 0, 16)
    assert len(ready) == 1  # the whole frame before it
