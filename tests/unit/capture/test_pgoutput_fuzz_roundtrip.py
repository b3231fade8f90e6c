"""Property tests: any message the test encoder (``wire``, written from the protocol
documentation) builds decodes to exactly the values it was built from."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.capture.pgoutput import (
    Begin,
    Column,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    PgOutputDecoder,
    Relation,
    StreamAbort,
    StreamCommit,
    Truncate,
    Update,
)

from . import wire

UINT32 = st.integers(0, 0xFFFFFFFF)
UINT64 = st.integers(0, (1 << 64) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
NAMES = st.text(st.characters(codec="utf-8", exclude_characters="\0"),
                max_size=20)
VALUES: st.SearchStrategy[wire.Value] = st.one_of(
    st.none(), st.just(("u",)), st.binary(max_size=40),
    st.text(st.characters(codec="utf-8"), max_size=40))
COLUMNS = st.lists(st.tuples(st.sampled_from([0, 1]), NAMES, UINT32,
                             st.integers(-(1 << 31), (1 << 31) - 1)), max_size=8)
XIDS = st.one_of(st.none(), UINT32)


@settings(max_examples=300)
@given(oid=UINT32, namespace=NAMES, name=NAMES, columns=COLUMNS,
       identity=st.sampled_from([b"d", b"n", b"f", b"i"]), xid=XIDS)
def test_relation_round_trip(oid: int, namespace: str, name: str,
                             columns: list[tuple[int, str, int, int]], identity: bytes,
                             xid: int | None) -> None:
    decoder = PgOutputDecoder(proto_version=2)
    if xid is not None:
        decoder.decode(wire.stream_start(xid, first_segment=True))
    decoded = decoder.decode(wire.relation(oid, namespace, name, columns, identity, xid=xid))
    assert decoded == Relation(
        oid, namespace, name, identity.decode(),
        tuple(Column(bool(flags), column, type_oid, modifier)
              for flags, column, type_oid, modifier in columns), xid=xid)


def _decoder_with_relation(oid: int, width: int, xid: int | None) -> PgOutputDecoder:
    decoder = PgOutputDecoder(proto_version=2)
    decoder.decode(wire.relation(oid, "s", "t", [(1, f"c{i}", 25, -1) for i in range(width)]))
    if xid is not None:
        decoder.decode(wire.stream_start(xid, first_segment=True))
    return decoder


@settings(max_examples=500)
@given(oid=UINT32, data=st.data(), xid=XIDS, width=st.integers(0, 8))
def test_row_changes_round_trip(oid: int, data: st.DataObject, xid: int | None,
                                width: int) -> None:
    row = st.lists(VALUES, min_size=width, max_size=width)
    new, old = data.draw(row), data.draw(row)
    decoder = _decoder_with_relation(oid, width, xid)
    assert decoder.decode(wire.insert(oid, new, xid=xid)) == Insert(
        oid, wire.expected(new), xid=xid)
    kind = data.draw(st.sampled_from([b"K", b"O"]))
    assert decoder.decode(wire.update(oid, new, old, kind=kind, xid=xid)) == Update(
        oid, kind.decode(), wire.expected(old), wire.expected(new), xid=xid)  # type: ignore[arg-type]
    assert decoder.decode(wire.update(oid, new, xid=xid)) == Update(
        oid, None, None, wire.expected(new), xid=xid)
    assert decoder.decode(wire.delete(oid, old, kind=kind, xid=xid)) == Delete(
        oid, kind.decode(), wire.expected(old), xid=xid)  # type: ignore[arg-type]


@settings(max_examples=300)
@given(final_lsn=UINT64, commit_ts=INT64, xid=UINT32, end_lsn=UINT64,
       flags=st.integers(0, 255))
def test_transaction_boundaries_round_trip(final_lsn: int, commit_ts: int, xid: int,
                                           end_lsn: int, flags: int) -> None:
    decoder = PgOutputDecoder(proto_version=2)
    assert decoder.decode(wire.begin(final_lsn, commit_ts, xid)) == Begin(
        final_lsn, commit_ts, xid)
    assert decoder.decode(wire.commit(final_lsn, end_lsn, commit_ts, flags)) == Commit(
        flags, final_lsn, end_lsn, commit_ts)
    assert decoder.decode(wire.stream_commit(xid, final_lsn, end_lsn, commit_ts, flags)) == \
        StreamCommit(flags, final_lsn, end_lsn, commit_ts, xid=xid)
    assert decoder.decode(wire.stream_abort(xid, xid ^ 1)) == StreamAbort(xid, xid ^ 1)


@settings(max_examples=300)
@given(oids=st.lists(UINT32, max_size=10), options=st.integers(0, 3), prefix=NAMES,
       content=st.binary(max_size=100), lsn=UINT64, transactional=st.booleans())
def test_truncate_and_message_round_trip(oids: list[int], options: int, prefix: str,
                                         content: bytes, lsn: int,
                                         transactional: bool) -> None:
    decoder = PgOutputDecoder(proto_version=2)
    for oid in oids:  # a Truncate names relations the session has seen
        decoder.decode(wire.relation(oid, "s", f"t{oid}", [(1, "id", 23, -1)]))
    assert decoder.decode(wire.truncate(oids, options)) == Truncate(
        tuple(oids), bool(options & 1), bool(options & 2))
    assert decoder.decode(wire.message(prefix, content, lsn, transactional)) == \
        LogicalMessage(transactional, lsn, prefix, content)
