"""Fuzz targets of the native capture path against the Python reference.

``change``: one pgoutput Insert, Update or Delete (well-formed, mutated or raw bytes)
through ``dml_event`` and ``feed_batch`` (in a transaction, in a stream block): each
leaves it (Python converts it) or gives exactly what the decoder and ``insert_events``/
``update_events``/``delete_events`` make of it (the record ``complete`` makes, the frame
``StreamSpool.add`` writes).

``session``: a replication stream of XLogData messages (Relations, transactions,
streamed transactions with aborts, truncates, logical messages, keepalives; some
mutated) read twice, as the capture loop reads it: the reference decodes and assembles
every message; the fast path hands runs to ``feed_batch``, decodes what it leaves
and drains committed streams with ``spool_records``. Both must produce the same records
and stop on the same error.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, cast

import psycopg

from cdc.capture.events import (
    CommitInfo,
    PendingEvent,
    complete,
    delete_events,
    insert_events,
    update_events,
)
from cdc.capture.pgoutput import (
    Begin,
    Commit,
    Delete,
    Insert,
    PgOutputDecoder,
    StreamStart,
    StreamStop,
    Update,
)
from cdc.capture.schema.shapes import ShapeRegistry
from cdc.capture.snapshot.native import NativeTable
from cdc.capture.stream.native import BatchTable, NativeChanges
from cdc.capture.stream.replication import XLogData, parse_copy_message
from cdc.capture.stream.spool import StreamSpool
from cdc.capture.stream.transactions import TransactionAssembler
from cdc.errors import DecodeError
from cdc.log import Position, Record

from .fuzz_input import Choices
from .fuzz_native_checks import Core, NativeFault, calling, check_decode_error, native_call

# tables of the native kinds: (flags, name, type OID); the second has a composite key
# and odd names, the third a bytea column, the fourth arrays, ranges, interval and timetz
TABLES: dict[int, list[tuple[int, str, int]]] = {
    16401: [(1, "id", 20), (0, "note", 25), (0, "ok", 16), (0, "price", 701),
            (0, "amount", 1700), (0, "day", 1082), (0, "ts", 1114), (0, "at", 1184),
            (0, "doc", 3802), (0, "n", 23), (0, "r", 700), (0, "s", 21), (0, "v", 1043),
            (0, "js", 114)],
    16402: [(1, "k\"1", 23), (1, "k\u00e92", 25), (0, "x y", 1700)],
    16403: [(1, "id", 23), (0, "raw", 17)],
    16404: [(1, "id", 20), (0, "span", 1186), (0, "clock", 1266), (0, "ints", 1007),
            (0, "words", 1009), (0, "nums", 3904), (0, "during", 3908)],
}
OIDS = (*TABLES, 16409)  # the last one is never announced
DB = "app\"db"
XID = 7001
_XLOG = struct.Struct(">cQQq")


class _Info:
    server_version = 160000


class _Catalog:
    """Built-in types and DEFAULT replica identity only: the catalog is never queried."""

    info = _Info()


def relation(oid: int, namespace: str = "public", xid: int | None = None) -> bytes:
    """The Relation message of ``TABLES[oid]`` (its name: ``t<oid>``)."""
    out = b"R" + (b"" if xid is None else struct.pack(">I", xid)) + struct.pack(">I", oid)
    out += namespace.encode() + b"\0" + f"t{oid}".encode() + b"\0d"
    out += struct.pack(">h", len(TABLES[oid]))
    for flags, name, type_oid in TABLES[oid]:
        out += bytes([flags]) + name.encode() + b"\0" + struct.pack(">Ii", type_oid, -1)
    return out


def tuple_data(choices: Choices, types: list[int]) -> bytes:
    """TupleData of (about) one value of each type in ``types``, drawn from ``choices``."""
    count = len(types) if not choices.chance(16) else choices.below(len(types) + 2)
    out = struct.pack(">h", count)
    for index in range(count):
        kind = choices.below(24)
        if kind == 23:
            out += b"n"
        elif kind == 22:
            out += b"u"
        else:
            value = choices.value_of(types[index] if index < len(types) else 25)
            out += (b"b" if kind == 21 else b"t") + struct.pack(">i", len(value)) + value
    return out


def row_change(choices: Choices, oid: int, xid: int | None = None) -> bytes:
    """An Insert, Update (with or without an old key or row) or Delete of ``oid``."""
    types = [type_oid for _, _, type_oid in TABLES.get(oid, TABLES[16401])]
    head = struct.pack(">I", xid) if xid is not None else b""
    head += struct.pack(">I", oid)
    kind = choices.below(6)
    if kind == 0:
        return b"I" + head + b"N" + tuple_data(choices, types)
    if kind == 1:
        return b"U" + head + b"N" + tuple_data(choices, types)
    if kind in (2, 3):
        old = (b"K" if kind == 2 else b"O") + tuple_data(choices, types)
        return b"U" + head + old + b"N" + tuple_data(choices, types)
    return b"D" + head + (b"K" if kind == 4 else b"O") + tuple_data(choices, types)


@dataclass
class Session:
    """One replication session: decoder, assembler, and the native path over them."""

    decoder: PgOutputDecoder
    assembler: TransactionAssembler
    native: NativeChanges | None


@cache
def _spool_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="fuzz-native-"))


def remove_spools() -> None:
    """Remove the sessions' spool directories (after each input: libFuzzer ends the
    process without Python's exit handlers)."""
    if _spool_root.cache_info().currsize:
        shutil.rmtree(_spool_root(), ignore_errors=True)
        _spool_root.cache_clear()


def session(name: str, *, native_path: bool = False) -> Session:
    """A fresh session (its spool under a temporary directory); ``native_path``: with the
    native path."""
    shapes = ShapeRegistry(cast(psycopg.Connection[Any], _Catalog()), "app")
    assembler = TransactionAssembler(shapes, StreamSpool(_spool_root() / name), DB,
                                     "app.messages", frozenset({"fz"}))
    decoder = PgOutputDecoder(2)
    native = NativeChanges(decoder, assembler) if native_path else None
    return Session(decoder, assembler, native)


# -- one row change --------------------------------------------------------------------
def _reference_events(session: Session, payload: bytes, lsn: int
                      ) -> list[PendingEvent] | type[BaseException]:
    """The reference's events of ``payload``, or the type of the error it raises."""
    try:
        message = session.decoder.decode(payload)
    except DecodeError as error:
        check_decode_error(error, payload)
        return DecodeError
    try:
        if isinstance(message, Insert):
            shape = session.assembler.shapes.get(message.relation_oid)
            return insert_events(shape, message.new, lsn)
        if isinstance(message, Update):
            shape = session.assembler.shapes.get(message.relation_oid)
            return update_events(shape, message.old_kind, message.old, message.new, lsn)
        if isinstance(message, Delete):
            shape = session.assembler.shapes.get(message.relation_oid)
            return delete_events(shape, message.old_kind, message.old, lsn)
    except Exception as error:  # e.g. a numeric that is not UTF-8: the reference's own
        return type(error)
    return TypeError  # not a row change


def fuzz_change(core: Core, data: bytes) -> None:
    """One row change message through ``dml_event`` and ``feed_batch`` (its record in a
    transaction, its spool frame in a stream block), against the reference."""
    choices = Choices(data)
    oid = choices.pick([16401, 16402, 16404])  # tables the native core converts
    payload = choices.rest() if choices.chance(4) else choices.mutate(row_change(choices, oid))
    reference = session("change")
    reference.assembler.feed(reference.decoder.decode(relation(oid)), 0)
    shape = reference.assembler.shapes.get(oid)
    native = NativeTable.of(shape)
    if native is None:
        return  # a table of a type left to Python: nothing native to check
    if len(payload) >= 5:  # the caller looks the plan up by the OID: it is the table's
        payload = payload[:1] + struct.pack(">I", oid) + payload[5:]
    lsn = (3 << 32) + 0x1234
    events = _reference_events(reference, payload, lsn)
    converted = isinstance(events, list) and len(events) == 1

    event = native_call("dml_event", core.dml_event, payload, native.plan)
    if event is not None:
        assert isinstance(events, list), f"dml_event converted what the reference refuses " \
                                         f"({events}): {payload!r}"
        assert converted and event == (events[0].key, events[0].body, events[0].tombstone), \
            f"dml_event differs from the reference for {payload!r}: {event!r} vs {events!r}"

    commit = CommitInfo(b'"app"', (3 << 32) + 0xFFF0, 731, "2024-02-29T10:11:12.5Z")
    head = b',"source":{"db":%s,%s,"lsn":"' % (commit.db, shape.source_names)
    entry = (native.plan, shape.topic, head, shape.topic.encode(), shape.source_names)

    def learn(found: int) -> BatchTable | None:
        """No other table: ``feed_batch`` leaves the changes of any other OID."""
        return entry if found == oid else None

    ready: list[Record] = []
    taken, *_ = native_call(
        "feed_batch", core.feed_batch, [memoryview(_XLOG.pack(b"w", lsn, lsn, 0) + payload)],
        0, core.BatchTables(), learn, (commit.commit_lsn, commit.commit_lsn_text, commit.tail, 5),
        False, False, ready)
    if taken:
        assert isinstance(events, list) and converted, f"feed_batch took {payload!r}"
        expected = Record(shape.topic, events[0].key, complete(events[0], commit, 5),
                          Position(commit.commit_lsn, 5), events[0].tombstone)
        assert ready == [expected], f"feed_batch of {payload!r}: {ready!r} vs {expected!r}"
    assert (event is None) == (not taken), f"dml_event and feed_batch of {payload!r}"

    streamed = payload[:1] + struct.pack(">I", XID) + payload[1:]
    taken, frame, *_ = native_call(
        "feed_batch", core.feed_batch, [memoryview(_XLOG.pack(b"w", lsn, lsn, 0) + streamed)],
        0, core.BatchTables(), learn, None, True, False, [])
    if taken:
        assert isinstance(events, list) and converted, f"the frame of {streamed!r}"
        spool = StreamSpool(_spool_root() / "frame")
        try:
            spool.add(1, XID, events)
            expected_frame = spool.commit(1).file.read()  # type: ignore[union-attr]
        finally:
            spool.close()
        assert frame == expected_frame, f"the frame of {streamed!r}"


# -- a whole stream --------------------------------------------------------------------
def _other(choices: Choices, xid: int | None) -> bytes:
    """A message other than a row change inside a transaction (or a stream block)."""
    head = b"" if xid is None else struct.pack(">I", xid)
    oid = choices.pick(OIDS)
    kind = choices.below(8)
    if kind == 0:
        return relation(oid if oid in TABLES else 16402, choices.pick(["public", "s"]), xid)
    if kind == 1:
        return (b"T" + head + struct.pack(">i", 1) + bytes([choices.below(4)])
                + struct.pack(">I", oid))
    if kind == 2:
        content = choices.value()
        return (b"M" + head + bytes([choices.below(2)]) + struct.pack(">Q", 0x77) + b"fz\0"
                + struct.pack(">i", len(content)) + content)
    if kind == 3:
        return choices.blob(40)
    return row_change(choices, oid, xid)


def _changes(choices: Choices, xid: int | None) -> list[bytes]:
    """The messages of one transaction's body (or stream block), mostly row changes."""
    out = []
    for _ in range(choices.below(8) + 1):
        if choices.chance(6):
            out.append(_other(choices, xid))
        else:
            out.append(row_change(choices, choices.pick([16401, 16401, 16402, 16403, 16404]), xid))
    return out


def _messages(choices: Choices) -> list[bytes]:
    """A replication stream: CopyData messages (XLogData, now and then a keepalive) of
    normal and streamed transactions, some messages mutated."""
    payloads = [relation(16401), relation(16402), relation(16403)]
    streams: list[int] = []  # streamed transactions not ended yet
    for block in range(choices.below(6) + 1):
        kind = choices.below(8)
        final_lsn = (9 << 32) + 0x10000 * block + 0x10 * choices.byte()  # commits in order
        if kind <= 3 or (kind == 7 and not streams):
            payloads.append(b"B" + struct.pack(">QqI", final_lsn, choices.byte() << 40,
                                               700 + choices.byte()))
            payloads += _changes(choices, None)
            payloads.append(b"C\0" + struct.pack(">QQq", final_lsn, final_lsn + 8, 1 << 40))
        elif kind <= 6:
            xid = XID + choices.below(3)
            payloads.append(b"S" + struct.pack(">IB", xid, xid not in streams))
            payloads += _changes(choices, xid)
            payloads.append(b"E")
            if xid not in streams:
                streams.append(xid)
        else:
            xid = streams.pop(choices.below(len(streams)))
            if choices.chance(4):
                payloads.append(b"A" + struct.pack(">II", xid, xid + choices.below(2)))
            else:
                payloads.append(b"c" + struct.pack(">IBQQq", xid, 0, final_lsn, final_lsn + 8,
                                                   1 << 41))
    out = []
    for index, payload in enumerate(payloads):
        if choices.chance(24):
            out.append(b"k" + struct.pack(">QqB", 1 << 40, 0, 0))
        lsn = (8 << 32) + 0x40 * (index + 1)
        out.append(_XLOG.pack(b"w", lsn, lsn + 0x20, 0) + choices.mutate(payload, 40))
    return out


Outcome = tuple[list[Record], tuple[type[BaseException], str] | None, int, int | None]
"""The records, the error that stopped the stream, ``ack_lsn`` and the open transaction's
next ``seq``."""


def _outcome(state: Session, error: Exception | None) -> Outcome:
    transaction = state.assembler.transaction
    return (state.assembler.ready, None if error is None else (type(error), str(error)),
            state.assembler.ack_lsn, None if transaction is None else transaction.seq)


def _run_reference(raw: list[bytes]) -> Outcome:
    state = session("ref")
    try:
        for item in raw:
            message = parse_copy_message(memoryview(item))
            if not isinstance(message, XLogData):
                continue  # a keepalive
            decoded = _decode(state.decoder, bytes(message.payload))
            state.assembler.feed(decoded, message.start_lsn)
            while state.assembler.draining:
                state.assembler.drain(3)
    except Exception as error:  # compared with the fast path's
        return _outcome(state, error)
    finally:
        state.assembler.spool.close()
    return _outcome(state, None)


_KEEPS_SHAPES = frozenset({Begin, Commit, Insert, Update, Delete, StreamStart, StreamStop})


def _run_fast(raw: list[bytes]) -> Outcome:
    """As ``StreamLoop.convert``: runs through ``feed_batch`` (calling the native core in
    ``cdc.capture.stream.native``), the messages it leaves decoded one by one."""
    state = session("fast", native_path=True)
    native = state.native
    assert native is not None
    views = [memoryview(item) for item in raw]
    try:
        index = 0
        while index < len(views):
            index = native_call("feed_batch", native.feed_batch, views, index, begins=True)
            if index >= len(views):
                break
            message = parse_copy_message(views[index])
            index += 1
            if not isinstance(message, XLogData):
                continue  # a keepalive
            decoded = _decode(state.decoder, bytes(message.payload))
            state.assembler.feed(decoded, message.start_lsn)
            if type(decoded) not in _KEEPS_SHAPES:
                native.forget_tables()
            while state.assembler.draining:
                native_call("drain", native.drain, 3, 200)
    except NativeFault:
        raise
    except Exception as error:  # compared with the reference's
        return _outcome(state, error)
    finally:
        state.assembler.spool.close()
    return _outcome(state, None)


def _decode(decoder: PgOutputDecoder, payload: bytes) -> Any:
    try:
        return decoder.decode(payload)
    except DecodeError as error:
        check_decode_error(error, payload)
        raise


def fuzz_session(core: Core, data: bytes) -> None:
    """A replication stream through the reference and the fast path: same records, same
    error."""
    raw = _messages(Choices(data))
    expected = _run_reference(raw)
    with calling(core):
        actual = _run_fast(raw)
    assert actual == expected, f"the fast path differs from the reference for {raw!r}:\n" \
                               f"{actual!r}\nvs\n{expected!r}"
