"""Change events from decoded pgoutput rows (docs/architecture.md, "The event").

An event is encoded in two steps, so each row is serialised once: the *body*
(``op``, ``key``, ``before``, ``after``, ``unchanged``, ``schema_version``) when the row
arrives, and the ``source`` block spliced in when the commit position is known (at once
for a normal transaction, at Stream Commit for a streamed one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import orjson

from .codecs import AttributeCountError, Codec, JSONValue, decode_text
from .fallbacks import FALLBACKS
from .lsn import format_lsn
from .pgoutput import UNCHANGED_TOAST, Relation, TupleValue

Row = dict[str, JSONValue]


@dataclass(frozen=True, slots=True)
class TableShape:
    """What the builder needs of one relation: names, codecs, key columns, version.

    ``recheck(index)``: the relation's shape built from the catalog read again, when a
    value column ``index``'s codec refused may be of a type altered since (None: that
    type is unchanged); the row is then decoded again with it, and carries its version.
    """

    oid: int
    schema: str
    table: str
    topic: str
    columns: tuple[str, ...]
    codecs: tuple[Codec, ...]
    key_indexes: tuple[int, ...]
    schema_version: int
    source_names: bytes  # '"schema":"…","table":"…"', encoded once per table
    recheck: Callable[[int], TableShape | None] | None = None

    @classmethod
    def of(cls, relation: Relation, topic: str, codecs: tuple[Codec, ...],
           key_columns: Sequence[str] | None, schema_version: int,
           recheck: Callable[[int], TableShape | None] | None = None) -> TableShape:
        """The shape of ``relation``; ``key_columns`` overrides the replica-identity flags
        (REPLICA IDENTITY FULL flags every column: the primary key is the key then)."""
        names = tuple(c.name for c in relation.columns)
        if key_columns:
            keys = tuple(names.index(k) for k in key_columns if k in names)
        else:
            keys = tuple(i for i, c in enumerate(relation.columns) if c.key)
        if not keys:
            keys = tuple(range(len(names)))
        names_json = b'"schema":%s,"table":%s' % (orjson.dumps(relation.namespace),
                                                   orjson.dumps(relation.name))
        return cls(relation.oid, relation.namespace, relation.name, topic, names, codecs,
                   keys, schema_version, names_json, recheck)


@dataclass(slots=True)
class PendingEvent:
    """An event waiting for its source block: topic, key bytes, body bytes."""

    topic: str
    key: bytes
    body: bytes
    lsn: int
    tombstone: bool
    source_names: bytes


class _Rebuilt(Exception):
    """A value did not fit its codec, and the relation's shape was rebuilt since its type
    changed: the row is decoded again with ``shape``."""

    def __init__(self, shape: TableShape) -> None:
        super().__init__(shape.table)
        self.shape = shape


def _fallback(shape: TableShape, index: int, text: str, lsn: int,
              unparsed: list[str], reason: Exception) -> JSONValue:
    """A value its codec could not read: PostgreSQL's text, its column marked unparsed."""
    name = shape.columns[index]
    if name not in unparsed:
        unparsed.append(name)
    FALLBACKS.record(f"{shape.schema}.{shape.table}", name, lsn, reason)
    return decode_text(text)


def _decode(shape: TableShape, index: int, text: str, lsn: int,
            unparsed: list[str]) -> JSONValue:
    """A value in text format through its column's codec."""
    try:
        return shape.codecs[index](text)
    except AttributeCountError as exc:  # a composite type altered since its codec was built?
        rebuilt = shape.recheck(index) if shape.recheck is not None else None
        if rebuilt is None:
            return _fallback(shape, index, text, lsn, unparsed, exc)
        raise _Rebuilt(rebuilt) from exc
    except Exception as exc:  # one value never stops the capture
        return _fallback(shape, index, text, lsn, unparsed, exc)


def _decode_row(shape: TableShape, values: Sequence[TupleValue], lsn: int,
                unparsed: list[str]) -> tuple[Row, list[str]]:
    """The row's values by column name (an unchanged TOAST value is left out), and the
    names of the unchanged ones."""
    row: Row = {}
    unchanged: list[str] = []
    for index, (name, value) in enumerate(zip(shape.columns, values, strict=False)):
        if value is None:
            row[name] = None
        elif value is UNCHANGED_TOAST:
            unchanged.append(name)
        elif isinstance(value, str):
            row[name] = _decode(shape, index, value, lsn, unparsed)
        else:  # binary format is never requested
            row[name] = value.hex()
    return row, unchanged


def _is_text(values: Sequence[TupleValue], index: int) -> bool:
    return index < len(values) and isinstance(values[index], str)


def _key_of(shape: TableShape, values: Sequence[TupleValue], row: Row) -> Row:
    """The key of a row ``_decode_row`` decoded: a key value not sent as text (NULL,
    unchanged TOAST, binary, missing) is null."""
    names = shape.columns
    return {names[i]: row[names[i]] if _is_text(values, i) else None
            for i in shape.key_indexes}


def _decode_key(shape: TableShape, values: Sequence[TupleValue], lsn: int,
                unparsed: list[str]) -> Row:
    """The key of a row whose other values are not wanted (an old key tuple)."""
    key: Row = {}
    for i in shape.key_indexes:
        value = values[i] if i < len(values) else None
        key[shape.columns[i]] = (_decode(shape, i, value, lsn, unparsed)
                                 if isinstance(value, str) else None)
    return key


def _body(op: str, key: Row, before: Row | None, after: Row | None, unchanged: list[str],
          version: int, unparsed: list[str]) -> bytes:
    """The event body; ``unparsed`` only when a value is kept as text."""
    event: dict[str, object] = {"op": op, "key": key, "before": before, "after": after,
                                "unchanged": unchanged}
    if unparsed:
        event["unparsed"] = unparsed
    event["schema_version"] = version
    return orjson.dumps(event)


def insert_events(shape: TableShape, new: Sequence[TupleValue], lsn: int,
                  op: str = "c") -> list[PendingEvent]:
    """``c``: a new row (``r``: a row read by a snapshot)."""
    try:
        return _insert_events(shape, new, lsn, op)
    except _Rebuilt as rebuilt:
        return _insert_events(_final(rebuilt.shape), new, lsn, op)


def _final(shape: TableShape) -> TableShape:
    """``shape`` for decoding a row again after it was rebuilt: a value that still does
    not fit is kept as text, not rechecked again."""
    return replace(shape, recheck=None)


def _insert_events(shape: TableShape, new: Sequence[TupleValue], lsn: int,
                   op: str) -> list[PendingEvent]:
    unparsed: list[str] = []
    after, unchanged = _decode_row(shape, new, lsn, unparsed)
    key = _key_of(shape, new, after)
    return [PendingEvent(shape.topic, orjson.dumps(key),
                         _body(op, key, None, after, unchanged, shape.schema_version, unparsed),
                         lsn, False, shape.source_names)]


def read_event(shape: TableShape, values: Sequence[str | None], lsn: int) -> PendingEvent:
    """``r``: a row a snapshot read (every value as text or NULL)."""
    return insert_events(shape, values, lsn, "r")[0]


def update_events(shape: TableShape, old_kind: str | None, old: Sequence[TupleValue] | None,
                  new: Sequence[TupleValue], lsn: int) -> list[PendingEvent]:
    """``u``; when the key itself changed, a ``d`` of the old key then a ``c`` of the new
    one, so every key's history stays in its own partition (the ``c`` with the unchanged
    TOAST columns the old row holds, under REPLICA IDENTITY FULL)."""
    try:
        return _update_events(shape, old_kind, old, new, lsn)
    except _Rebuilt as rebuilt:
        return _update_events(_final(rebuilt.shape), old_kind, old, new, lsn)


def _update_events(shape: TableShape, old_kind: str | None, old: Sequence[TupleValue] | None,
                   new: Sequence[TupleValue], lsn: int) -> list[PendingEvent]:
    unparsed: list[str] = []
    after, unchanged = _decode_row(shape, new, lsn, unparsed)
    key = _key_of(shape, new, after)
    before: Row | None = None
    if old is None:
        old_key = key
    elif old_kind == "O":
        before, _ = _decode_row(shape, old, lsn, unparsed)
        old_key = _key_of(shape, old, before)
    else:
        old_key = _decode_key(shape, old, lsn, unparsed)
    version = shape.schema_version
    if old_key != key:
        if before is not None and unchanged:  # REPLICA IDENTITY FULL: the old row has them
            after, unchanged = _completed(shape, after, unchanged, before)
        return [PendingEvent(shape.topic, orjson.dumps(old_key),
                             _body("d", old_key, before, None, [], version, unparsed),
                             lsn, True, shape.source_names),
                PendingEvent(shape.topic, orjson.dumps(key),
                             _body("c", key, None, after, unchanged, version, unparsed),
                             lsn, False, shape.source_names)]
    return [PendingEvent(shape.topic, orjson.dumps(key),
                         _body("u", key, before, after, unchanged, version, unparsed),
                         lsn, False, shape.source_names)]


def delete_events(shape: TableShape, old_kind: str, old: Sequence[TupleValue],
                  lsn: int) -> list[PendingEvent]:
    """``d``: the row is gone; ``before`` is the old row under REPLICA IDENTITY FULL."""
    try:
        return _delete_events(shape, old_kind, old, lsn)
    except _Rebuilt as rebuilt:
        return _delete_events(_final(rebuilt.shape), old_kind, old, lsn)


def _completed(shape: TableShape, after: Row, unchanged: list[str], before: Row
               ) -> tuple[Row, list[str]]:
    """A key change's new row with the unchanged TOAST columns the old row holds (under
    REPLICA IDENTITY FULL the old row is whole): its insert is then complete, as no sink
    holds a row of the new key to take them from. The columns stay in the table's order."""
    filled = {name for name in unchanged if name in before}
    row = {name: before[name] if name in filled else after[name]
           for name in shape.columns if name in after or name in filled}
    return row, [name for name in unchanged if name not in filled]


def _delete_events(shape: TableShape, old_kind: str, old: Sequence[TupleValue],
                   lsn: int) -> list[PendingEvent]:
    unparsed: list[str] = []
    before: Row | None = None
    if old_kind == "O":
        before, _ = _decode_row(shape, old, lsn, unparsed)
        key = _key_of(shape, old, before)
    else:
        key = _decode_key(shape, old, lsn, unparsed)
    return [PendingEvent(shape.topic, orjson.dumps(key),
                         _body("d", key, before, None, [], shape.schema_version, unparsed),
                         lsn, True, shape.source_names)]


def truncate_event(shape: TableShape, cascade: bool, restart_identity: bool,
                   lsn: int, *, recreated: bool = False, dropped: bool = False
                   ) -> PendingEvent:
    """``t``: every row of the table is gone (key ``{}``: compaction keeps the last).
    ``recreated``: the table was dropped and created again under the same name;
    ``dropped``: the DDL capture saw it dropped."""
    details: dict[str, bool] = {"cascade": cascade, "restart_identity": restart_identity}
    if recreated:
        details["recreated"] = True
    if dropped:
        details["dropped"] = True
    body = orjson.dumps({"op": "t", "key": {}, "before": None, "after": None, "unchanged": [],
                         "truncate": details, "schema_version": shape.schema_version})
    return PendingEvent(shape.topic, b"{}", body, lsn, False, shape.source_names)


def message_event(topic: str, prefix: str, content: bytes, transactional: bool,
                  lsn: int) -> PendingEvent:
    """A logical decoding message (``pg_logical_emit_message``): op ``m``."""
    try:
        payload: JSONValue = orjson.loads(content)
    except orjson.JSONDecodeError:
        payload = content.decode("utf-8", "backslashreplace")
    body = orjson.dumps({"op": "m", "key": {"prefix": prefix}, "before": None,
                         "after": None, "unchanged": [],
                         "message": {"prefix": prefix, "content": payload,
                                     "transactional": transactional},
                         "schema_version": 1})
    return PendingEvent(topic, orjson.dumps({"prefix": prefix}), body, lsn, False,
                        b'"schema":null,"table":null')


@dataclass(frozen=True)
class CommitInfo:
    """What every event of one transaction shares in its source block."""

    db: bytes  # JSON string
    commit_lsn: int
    txid: int
    commit_ts: str
    snapshot: bool = False

    @cached_property
    def tail(self) -> bytes:
        """The source fields after ``seq``, encoded once per transaction."""
        return b'"txid":%d,"commit_ts":"%s","snapshot":%s}}' % (
            self.txid, self.commit_ts.encode(), b"true" if self.snapshot else b"false")

    @cached_property
    def commit_lsn_text(self) -> bytes:
        """``commit_lsn`` as PostgreSQL writes an LSN (``16/B374D848``)."""
        return format_lsn(self.commit_lsn).encode()


def complete(event: PendingEvent, commit: CommitInfo, seq: int) -> bytes:
    """The event's final bytes: its body with the ``source`` block as the last field."""
    lsn = event.lsn
    return b'%s,"source":{"db":%s,%s,"lsn":"%X/%X","commit_lsn":"%s","seq":%d,%s' % (
        event.body[:-1], commit.db, event.source_names, lsn >> 32, lsn & 0xFFFFFFFF,
        commit.commit_lsn_text, seq, commit.tail)
