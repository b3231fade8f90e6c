"""Every pgoutput message type decoded from hand-built bytes (outside stream blocks)."""

from __future__ import annotations

import pytest

from cdc.capture.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Column,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    Origin,
    PgOutputDecoder,
    Relation,
    Truncate,
    TypeMsg,
    Update,
)

from . import wire
from .wire import ORDERS, ORDERS_OID

ROW = ["42", "7", "paid", "12.50", None, "2026-11-21 10:00:00.123456+00"]


@pytest.fixture
def decoder() -> PgOutputDecoder:
    decoder = PgOutputDecoder(proto_version=2)
    decoder.decode(ORDERS)
    return decoder


def test_begin_with_unsigned_fields() -> None:
    payload = wire.begin(final_lsn=(1 << 64) - 2, commit_ts=-5, xid=0xFFFFFFFF)
    assert PgOutputDecoder().decode(payload) == Begin((1 << 64) - 2, -5, 0xFFFFFFFF)


def test_commit() -> None:
    payload = wire.commit(commit_lsn=0x16B37A0, end_lsn=0x16B37D0, commit_ts=817_000_000_123_456)
    assert PgOutputDecoder().decode(payload) == Commit(0, 0x16B37A0, 0x16B37D0,
                                                       817_000_000_123_456)


def test_origin() -> None:
    assert PgOutputDecoder().decode(wire.origin(99, "node_a")) == Origin(99, "node_a")


def test_relation_columns_key_flags_and_cache() -> None:
    decoder = PgOutputDecoder()
    payload = wire.relation(0x80000001, "", "t", [(1, "id", 23, -1), (0, "v", 1043, 68)],
                            identity=b"f")
    expected = Relation(0x80000001, "", "t", "f",
                        (Column(True, "id", 23, -1), Column(False, "v", 1043, 68)))
    assert decoder.decode(payload) == expected
    assert decoder.relations[0x80000001] == expected


def test_relation_for_known_oid_replaces_it(decoder: PgOutputDecoder) -> None:
    altered = wire.relation(ORDERS_OID, "public", "orders", [(1, "id", 20, -1)])
    decoder.decode(altered)
    assert decoder.relations[ORDERS_OID].columns == (Column(True, "id", 20, -1),)
    assert decoder.decode(wire.insert(ORDERS_OID, ["1"])) == Insert(ORDERS_OID, ("1",))


def test_relation_with_no_columns() -> None:
    relation = PgOutputDecoder().decode(wire.relation(5, "s", "empty", []))
    assert isinstance(relation, Relation)
    assert relation.columns == ()


def test_type() -> None:
    assert PgOutputDecoder().decode(wire.type_message(16400, "public", "mood")) == TypeMsg(
        16400, "public", "mood")


def test_insert_text_null_and_binary(decoder: PgOutputDecoder) -> None:
    row: list[wire.Value] = ["42", "7", "paid", "12.50", None, b"\x00\xff"]
    assert decoder.decode(wire.insert(ORDERS_OID, row)) == Insert(
        ORDERS_OID, ("42", "7", "paid", "12.50", None, b"\x00\xff"))


def test_insert_accepts_memoryview_and_decodes_utf8(decoder: PgOutputDecoder) -> None:
    row: list[wire.Value] = ["1", "2", "ünïcødé ✓", "0", "", "x"]
    message = decoder.decode(memoryview(wire.insert(ORDERS_OID, row)))
    assert isinstance(message, Insert)
    assert message.new[2] == "ünïcødé ✓"
    assert message.new[4] == ""


def test_text_that_is_not_utf8_is_kept_with_surrogateescape(decoder: PgOutputDecoder) -> None:
    payload = wire.insert(ORDERS_OID, ["1", "2", "x", "0", "", "y"]).replace(b"x", b"\xff")
    message = decoder.decode(payload)
    assert isinstance(message, Insert)
    assert message.new[2] == "\udcff"


def test_update_without_old_tuple(decoder: PgOutputDecoder) -> None:
    assert decoder.decode(wire.update(ORDERS_OID, ROW)) == Update(
        ORDERS_OID, None, None, wire.expected(ROW))


def test_update_with_key_tuple(decoder: PgOutputDecoder) -> None:
    key: list[wire.Value] = ["41", None, None, None, None, None]
    message = decoder.decode(wire.update(ORDERS_OID, ROW, old=key, kind=b"K"))
    assert message == Update(ORDERS_OID, "K", wire.expected(key), wire.expected(ROW))


def test_update_with_old_tuple_and_unchanged_toast(decoder: PgOutputDecoder) -> None:
    old: list[wire.Value] = ["42", "7", "new", "12.50", ("u",), "t"]
    new: list[wire.Value] = ["42", "7", "paid", "12.50", ("u",), "t"]
    message = decoder.decode(wire.update(ORDERS_OID, new, old=old, kind=b"O"))
    assert isinstance(message, Update)
    assert message.old_kind == "O"
    assert message.old is not None and message.old[4] is UNCHANGED_TOAST
    assert message.new[4] is UNCHANGED_TOAST
    assert message.new[2] == "paid"


@pytest.mark.parametrize("kind", [b"K", b"O"])
def test_delete(decoder: PgOutputDecoder, kind: bytes) -> None:
    old: list[wire.Value] = ["42", None, None, None, None, None]
    assert decoder.decode(wire.delete(ORDERS_OID, old, kind=kind)) == Delete(
        ORDERS_OID, "K" if kind == b"K" else "O", wire.expected(old))


@pytest.mark.parametrize(("options", "cascade", "restart"),
                         [(0, False, False), (1, True, False), (2, False, True), (3, True, True)])
def test_truncate_options(decoder: PgOutputDecoder, options: int, cascade: bool,
                          restart: bool) -> None:
    decoder.decode(wire.relation(0xFFFFFFF0, "public", "other", [(1, "id", 23, -1)]))
    payload = wire.truncate([ORDERS_OID, 0xFFFFFFF0], options)
    assert decoder.decode(payload) == Truncate((ORDERS_OID, 0xFFFFFFF0), cascade, restart)


@pytest.mark.parametrize("transactional", [True, False])
def test_logical_message(transactional: bool) -> None:
    payload = wire.message("app", b"\x00binary\xffcontent", lsn=1 << 63,
                           transactional=transactional)
    assert PgOutputDecoder().decode(payload) == LogicalMessage(
        transactional, 1 << 63, "app", b"\x00binary\xffcontent")


def test_messages_are_frozen(decoder: PgOutputDecoder) -> None:
    message = decoder.decode(wire.insert(ORDERS_OID, ROW))
    assert isinstance(message, Insert)
    with pytest.raises(AttributeError):
        message.relation_oid = 1  # type: ignore[misc]
    assert hash(message) == hash(Insert(ORDERS_OID, wire.expected(ROW)))
    assert repr(UNCHANGED_TOAST) == "UNCHANGED_TOAST"


def test_reset_forgets_relations(decoder: PgOutputDecoder) -> None:
    decoder.reset()
    assert decoder.relations == {}
    assert not decoder.in_stream
