"""The native row change path against the Python reference: the same records, byte for
byte, for pgoutput Insert, Update and Delete messages, or the message left to Python.

Random tables of built-in types (the native kinds and one it leaves to Python) get
random transactions of row changes: values as PostgreSQL writes them and odd ones (see
``test_native_snapshot``), NULLs, unchanged TOAST values, binary values, Updates with
and without an old key or row, key changes, Deletes by key or whole row, and now and
then a malformed message. Two sessions read the same messages: the reference (decoder,
``TransactionAssembler``) and the runner's fast path (``NativeChanges`` first, the
reference for whatever it leaves); their records and errors must be equal.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.capture import pgoutput as pg
from cdc.capture.codecs import (
    decode_bool,
    decode_bytea,
    decode_date,
    decode_float,
    decode_int,
    decode_interval,
    decode_json,
    decode_numeric,
    decode_text,
    decode_timestamp,
    decode_timestamptz,
    decode_timetz,
)
from cdc.capture.events import delete_events, insert_events, update_events
from cdc.capture.pgoutput import Delete, Insert, PgOutputDecoder, Update
from cdc.capture.schema.shapes import ShapeRegistry
from cdc.capture.snapshot.copy import copy_row
from cdc.capture.snapshot.native import NativeTable
from cdc.capture.stream.native import NativeChanges
from cdc.capture.stream.spool import StreamSpool
from cdc.capture.stream.transactions import TransactionAssembler
from cdc.errors import DecodeError
from cdc.log import Position, Record
from cdc.native import CORE

from . import wire
from .test_native_snapshot import (
    CANONICAL,
    INT_ARRAY,
    INT_RANGE,
    TEXT_ARRAY,
    TS_RANGE,
    VALUES,
)

KEEPS_SHAPES = (pg.Begin, pg.Commit, Insert, Update, Delete, pg.StreamStart, pg.StreamStop)

CHECKS = settings(max_examples=150, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
OID = 16390

# built-in type OID → the codec its values are drawn for (int4multirange: a table left to
# Python, its values drawn as any text)
OTHER = 4451
TYPES: dict[int, Any] = {
    20: decode_int, 21: decode_int, 23: decode_int, 16: decode_bool, 25: decode_text,
    1043: decode_text, 1700: decode_numeric, 700: decode_float, 701: decode_float,
    1082: decode_date, 1114: decode_timestamp, 1184: decode_timestamptz, 114: decode_json,
    3802: decode_json, 17: decode_bytea, 1186: decode_interval, 1266: decode_timetz,
    1007: INT_ARRAY, 1009: TEXT_ARRAY, 3904: INT_RANGE, 3908: TS_RANGE, OTHER: decode_text,
}
NATIVE_TYPES = [oid for oid in TYPES if oid != OTHER]


class Binary(bytes):
    """A value in binary format (``b``)."""


class Unchanged:
    """An unchanged TOAST value (``u``)."""


UNCHANGED = Unchanged()
Value = bytes | Binary | Unchanged | None


def tuple_data(values: Sequence[Value]) -> bytes:
    out = struct.pack(">h", len(values))
    for value in values:
        if value is None:
            out += b"n"
        elif isinstance(value, Unchanged):
            out += b"u"
        else:
            out += (b"b" if isinstance(value, Binary) else b"t") + struct.pack(">i", len(value))
            out += value
    return out


def insert(new: Sequence[Value]) -> bytes:
    return b"I" + struct.pack(">I", OID) + b"N" + tuple_data(new)


def update(new: Sequence[Value], old: Sequence[Value] | None = None, kind: bytes = b"K"
           ) -> bytes:
    out = b"U" + struct.pack(">I", OID)
    if old is not None:
        out += kind + tuple_data(old)
    return out + b"N" + tuple_data(new)


def delete(old: Sequence[Value], kind: bytes = b"K") -> bytes:
    return b"D" + struct.pack(">I", OID) + kind + tuple_data(old)


def _raw(copy_text: bytes) -> bytes | None:
    """A value drawn as COPY text, as pgoutput sends it (no escapes; None for NULL)."""
    value = copy_row(copy_text)[0]
    return None if value is None else value.encode("utf-8", "surrogateescape")


Column = tuple[str, int, bool]  # name, type OID, key flag


@st.composite
def tables(draw: st.DrawFn) -> list[Column]:
    names = draw(st.lists(st.text(min_size=1, max_size=6).filter(lambda n: "\0" not in n),
                          min_size=1, max_size=6, unique=True))
    oids = draw(st.sampled_from([NATIVE_TYPES, NATIVE_TYPES, NATIVE_TYPES, list(TYPES)]))
    return [(name, draw(st.sampled_from(oids)), draw(st.booleans())) for name in names]


@st.composite
def rows(draw: st.DrawFn, table: list[Column], clean: bool) -> list[Value]:
    """A row of ``table``: what PostgreSQL writes when ``clean``, odd values besides."""
    out: list[Value] = []
    for _, oid, _ in table:
        codec = TYPES[oid]
        choice = draw(st.integers(0, 19))
        if choice == 0:
            out.append(None)
        elif choice == 1:
            out.append(UNCHANGED)
        elif clean or choice > 6:
            out.append(_raw(draw(CANONICAL[codec])))
        elif choice == 2:
            out.append(Binary(draw(st.binary(max_size=4))))
        else:
            out.append(_raw(draw(VALUES[codec])))
    return out


def _keys(table: list[Column]) -> list[int]:
    keys = [i for i, (_, _, key) in enumerate(table) if key]
    return keys or list(range(len(table)))


@st.composite
def changes(draw: st.DrawFn, table: list[Column]) -> tuple[bytes, bool]:
    """One Insert, Update or Delete of ``table``, and whether it holds only what
    PostgreSQL writes with one key (the native core must convert those itself);
    sometimes malformed."""
    clean = draw(st.booleans())
    new = draw(rows(table, clean))
    keys = _keys(table)
    old_key: list[Value] = [v if i in keys else None for i, v in enumerate(new)]
    if draw(st.integers(0, 4)) == 0:  # another key, perhaps
        old_key = [v if i in keys else None for i, v in enumerate(draw(rows(table, clean)))]
        clean = False
    kind = draw(st.sampled_from(["insert", "update", "update_k", "update_o", "delete_k",
                                 "delete_o"]))
    if kind == "insert":
        payload = insert(new)
    elif kind == "update":
        payload = update(new)
    elif kind == "update_k":
        payload = update(new, old_key, b"K")
    elif kind == "update_o":
        old = draw(rows(table, clean))
        payload = update(new, [v if i in keys else old[i] for i, v in enumerate(old_key)], b"O")
    elif kind == "delete_k":
        payload = delete(old_key, b"K")
    else:
        payload = delete(new, b"O")
    odd = draw(st.integers(0, 30))
    if odd == 0:
        payload = payload[:draw(st.integers(0, len(payload) - 1))]
    elif odd == 1:
        payload += b"\0"
    elif odd == 2:  # a column too many
        payload = payload[:6] + struct.pack(">h", len(table) + 1) + payload[8:]
    return payload, clean and odd > 2


def _relation(table: list[Column]) -> bytes:
    return wire.relation(OID, "public", "t\"ab'le", [(1 if key else 0, name, oid, -1)
                                                      for name, oid, key in table])


class _Info:
    server_version = 150000


class _CatalogConnection:
    """Only built-in types and DEFAULT replica identity: the catalog is never queried."""

    info = _Info()


def _session(tmp_path: Path, name: str) -> tuple[PgOutputDecoder, TransactionAssembler]:
    shapes = ShapeRegistry(cast(psycopg.Connection[Any], _CatalogConnection()), "app")
    spool = StreamSpool(tmp_path / name)
    return (PgOutputDecoder(2),
            TransactionAssembler(shapes, spool, "app\"db", "app.messages", frozenset()))


def _outcome(feed: Any, payload: bytes, lsn: int, assembler: TransactionAssembler) -> object:
    """The records one message adds, or the error it raises."""
    before = len(assembler.ready)
    try:
        feed(payload, lsn)
    except Exception as exc:  # compared, not hidden
        return (type(exc), str(exc))
    return assembler.ready[before:]


def feed_change(native: NativeChanges, payload: bytes, lsn: int) -> bool:
    """The row change ``payload`` through ``feed_batch`` alone (as one XLogData message
    at ``lsn``): True when the native core took it. Other messages are left to the
    caller's decoder, as the reference takes them."""
    if payload[:1] not in (b"I", b"U", b"D"):
        return False
    return native.feed_batch([memoryview(wire.xlog(payload, lsn))], 0, begins=False) == 1


def decode_into(native: NativeChanges, payload: bytes, lsn: int) -> None:
    """``payload`` decoded and assembled, as the capture loop takes what the native core
    leaves (a message that may change a shape makes ``feed_batch`` look tables up again)."""
    decoded = native.decoder.decode(payload)
    native.assembler.feed(decoded, lsn)
    if not isinstance(decoded, KEEPS_SHAPES):
        native.forget_tables()


def run_both(tmp_path: Path, payloads: list[bytes]
             ) -> tuple[list[object], list[object], list[bool]]:
    """Feed both sessions every payload (at LSNs 0x10, 0x20, …): the reference's
    outcomes, the fast path's, and which messages the native core converted."""
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

    expected, actual = [], []
    for index, payload in enumerate(payloads):
        lsn = (3 << 32) + 0x10 * (index + 1)
        expected.append(_outcome(reference, payload, lsn, ref))
        actual.append(_outcome(fast, payload, lsn, assembler))
    return expected, actual, taken


def _transaction(body: list[bytes], final_lsn: int = (3 << 32) + 0xFFFF0) -> list[bytes]:
    return [wire.begin(final_lsn, 7_000_123, 42), *body,
            wire.commit(final_lsn, final_lsn + 8, 7_000_123)]


@CHECKS
@given(st.data())
def test_the_fast_path_writes_the_reference_records(tmp_path_factory: Any,
                                                     data: st.DataObject) -> None:
    table = data.draw(tables())
    body = data.draw(st.lists(changes(table), min_size=1, max_size=8))
    payloads = [_relation(table), *_transaction([payload for payload, _ in body])]
    expected, actual, taken = run_both(tmp_path_factory.mktemp("s"), payloads)
    assert actual == expected
    for records in actual:
        if isinstance(records, list):
            assert all(type(r) is Record and type(r.position) is Position for r in records)
    assert not taken[0] and not taken[1] and not taken[-1]  # Relation, Begin, Commit
    if all(oid != OTHER for _, oid, _ in table):
        for (payload, clean), took in zip(body, taken[2:-1], strict=True):
            assert took or not clean, f"PostgreSQL's own output fell back: {payload!r}"


def _shape_of(table: list[Column], tmp_path: Path) -> tuple[Any, PgOutputDecoder]:
    decoder, assembler = _session(tmp_path, "shape")
    assembler.feed(decoder.decode(_relation(table)), 0)
    return assembler.shapes.get(OID), decoder


@CHECKS
@given(st.data())
def test_events_are_the_reference_bytes(tmp_path_factory: Any, data: st.DataObject) -> None:
    table = data.draw(tables().filter(lambda t: all(oid != OTHER for _, oid, _ in t)))
    shape, decoder = _shape_of(table, tmp_path_factory.mktemp("s"))
    native = NativeTable.of(shape)
    assert native is not None
    payload, clean = data.draw(changes(table))
    event = CORE.dml_event(payload, native.plan)
    try:
        message = decoder.decode(payload)
    except DecodeError:
        assert event is None
        return
    lsn = 0x1234
    if isinstance(message, Insert):
        events = insert_events(shape, message.new, lsn)
    elif isinstance(message, Update):
        events = update_events(shape, message.old_kind, message.old, message.new, lsn)
    else:
        assert isinstance(message, Delete)
        events = delete_events(shape, message.old_kind, message.old, lsn)
    if event is None:
        assert not clean, f"PostgreSQL's own output fell back: {payload!r}"
    else:
        assert len(events) == 1
        assert event == (events[0].key, events[0].body, events[0].tombstone)


def test_common_changes_are_converted_natively(tmp_path: Path) -> None:
    table = [("id", 20, True), ("note", 25, False), ("amount", 1700, False),
             ("price", 701, False), ("at", 1184, False), ("doc", 3802, False),
             ("day", 1082, False), ("ts", 1114, False), ("ok", 16, False)]
    row: list[Value] = [b"7", "q\"\\ \t\u00e9\u2603 \U0001F600".encode(), b"-0.000", b"-0",
                        b"2024-02-29 10:11:12.5+00", b'{"a": [1, -0, 1.5e300], "b": null}',
                        b"2024-02-29", b"2024-02-29 10:11:12", b"t"]
    odd: list[Value] = [b"8", None, b"NaN", b"-Infinity", b"infinity", b'"\\u00e9"',
                        b"-infinity", b"2024-02-29 10:11:12.000001", b"f"]
    toast: list[Value] = [b"7", UNCHANGED, b"1", b"Infinity", None, UNCHANGED, None, None,
                          None]
    key: list[Value] = [b"7", None, None, None, None, None, None, None, None]
    body = [insert(row), insert(odd), update(toast), update(row, key, b"K"),
            update(odd, odd, b"O"), update(toast, row, b"O"), delete(key, b"K"),
            delete(row, b"O")]
    expected, actual, taken = run_both(tmp_path, [_relation(table), *_transaction(body)])
    assert actual == expected
    assert taken == [False, False, *[True] * len(body), False]
    records = cast(list[list[Record]], actual)
    assert [r.position.seq for [r] in records[2:-1]] == list(range(len(body)))
    assert [r.tombstone for [r] in records[2:-1]] == [False] * 6 + [True] * 2


def test_what_python_must_decide_takes_the_python_path(tmp_path: Path) -> None:
    table = [("id", 23, True), ("v", 701, False)]
    body = [insert([b"1", b"1e999"]),  # kept as text: unparsed
            insert([b"1", Binary(b"\x01")]),  # binary format
            insert([b"1", b"\xff"]),  # not UTF-8
            update([b"2", b"1"], [b"1", None], b"K"),  # the key changed: d + c
            insert([b"x", b"1"])]  # not an int
    expected, actual, taken = run_both(tmp_path, [_relation(table), *_transaction(body)])
    assert actual == expected
    assert not any(taken)
    assert len(cast(list[object], actual[5])) == 2


def test_outside_a_transaction_the_reference_decides(tmp_path: Path) -> None:
    table = [("id", 23, True)]
    streamed = [wire.stream_start(9, True), wire.relation(OID, "public", "t", [(1, "id", 23, -1)],
                                                          xid=9),
                wire.insert(OID, ["5"], xid=9), wire.stream_stop(),
                wire.stream_commit(9, 0x900, 0x908, 0)]
    payloads = [_relation(table), insert([b"1"]),  # no Begin: the reference's error
                wire.insert(OID + 1, ["1"]),  # a relation never announced
                *streamed, *_transaction([insert([b"2"])])]
    expected, actual, taken = run_both(tmp_path, payloads)
    assert actual == expected
    assert isinstance(actual[1], tuple) and isinstance(actual[2], tuple)
    # the streamed insert is spooled natively (``test_native_stream``), the rest not
    assert taken == [False] * 5 + [True] + [False] * 3 + [True, False]


def test_a_new_relation_message_rebuilds_the_plan(tmp_path: Path) -> None:
    as_int = [("id", 23, True), ("v", 23, False)]
    as_text = [("id", 23, True), ("v", 25, False)]
    payloads = [_relation(as_int), *_transaction([insert([b"1", b"2"])]),
                _relation(as_text), *_transaction([insert([b"1", b"2"])], (4 << 32))]
    expected, actual, taken = run_both(tmp_path, payloads)
    assert actual == expected
    assert taken.count(True) == 2
    records = cast(list[list[Record]], actual)
    values = [r.value for r in records[2] + records[6]]
    assert b'"v":2' in values[0] and b'"v":"2"' in values[1]


def test_tables_are_kept_between_batches_until_a_shape_changes(tmp_path: Path) -> None:
    """The native core keeps each table's conversion between ``feed_batch`` calls; when
    the registry rebuilds a shape on its own (as ``recheck_shape`` does when a composite
    type changed, with no message in the stream), the next call converts with the new
    one."""
    as_int = [("id", 23, True), ("v", 23, False)]
    as_text = [("id", 23, True), ("v", 25, False)]
    decoder, assembler = _session(tmp_path, "kept")
    native = NativeChanges(decoder, assembler)

    def converted(final_lsn: int) -> bytes:
        begin, change, commit = _transaction([insert([b"1", b"2"])], final_lsn)
        decode_into(native, begin, final_lsn - 0x30)
        assert feed_change(native, change, final_lsn - 0x20)
        decode_into(native, commit, final_lsn - 0x10)
        return assembler.ready.pop().value

    decode_into(native, _relation(as_int), 0x10)
    assert b'"v":2' in converted(3 << 32)
    assert len(native._batch_tables) == 1
    assert b'"v":2' in converted(4 << 32)  # the same conversion, kept

    # the registry's shape changes while the decoder saw no message
    relation = decoder.decode(_relation(as_text))
    assert isinstance(relation, pg.Relation)
    assembler.shapes.learn(relation)
    assert b'"v":"2"' in converted(5 << 32)

    native.forget_tables()
    assert len(native._batch_tables) == 0

