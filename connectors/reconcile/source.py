"""Reading a table as the capture would: key-ordered chunks rendered into event rows.

Rows are read as text with the capture's pinned session settings (``cdc.capture.source.session``)
and turned into the event's ``key`` and ``after`` objects by the capture's own
``read_event`` (the codecs of the snapshot), so a row compares exactly with what the
pipeline wrote. Each read notes the WAL position just before it (``before_lsn``: a
sink version older than this is not a change made while the rows were read) and just
after it (``after_lsn``: everything the read saw was committed before it), and each
row's ``stamp`` (``xmin`` and ``ctid``: any update or delete of the row changes it).

A walk's chunks are read with ``COPY (…) TO STDOUT`` and turned into events by the
snapshot's native converter (``cdc.capture.snapshot.native``) when it handles the table:
byte for byte what ``read_event`` makes, at a fraction of the cost; their rows carry no
stamp (only rechecks compare stamps, and ``rows_of`` reads them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg
from psycopg import sql

from cdc.capture.events import TableShape, read_event
from cdc.capture.schema.shapes import ShapeRegistry
from cdc.capture.snapshot.catalog import catalog_tables
from cdc.capture.snapshot.chunks import ChunkKey, chunk_key, chunk_query
from cdc.capture.snapshot.copy import copy_row
from cdc.capture.snapshot.native import NativeTable
from cdc.capture.source import session
from cdc.config.topic_names import TopicNamer
from cdc.errors import SourceError

from .copy_out import copy_out

KeyText = tuple[str, ...]  # a row's chunk-key columns as PostgreSQL's text


class SourceRow:
    """One row as its event carries it, with its chunk key as text.

    ``after_json``: the ``after`` object's JSON text as the event carries it, when the
    read kept it (``COPY`` reads); ``after`` is then parsed from it on first use.
    """

    __slots__ = ("_after", "after_json", "key", "key_text", "stamp")

    def __init__(self, key: dict[str, Any], after: dict[str, Any] | None, key_text: KeyText,
                 stamp: str = "", *, after_json: bytes = b"") -> None:
        self.key = key
        self.key_text = key_text
        self.stamp = stamp  # the row version's xmin and ctid: equal stamps, no change between
        self.after_json = after_json
        self._after = after

    @property
    def after(self) -> dict[str, Any]:
        """The row's ``after`` object."""
        if self._after is None:
            self._after = orjson.loads(self.after_json)
        return self._after


@dataclass(frozen=True, slots=True)
class SourceRead:
    """Rows read by one statement and the WAL positions around it."""

    rows: list[SourceRow]
    before_lsn: int
    after_lsn: int


def current_lsn(conn: psycopg.Connection[Any]) -> int:
    """``pg_current_wal_lsn()`` as an integer."""
    row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


class TableSource:
    """One table, read in chunks of its key (``cdc.capture.snapshot.chunks``)."""

    def __init__(self, dsn: str, schema: str, table: str, topics: TopicNamer) -> None:
        self.name = f"{schema}.{table}"
        self.conn = session.connect(dsn)
        try:
            found = catalog_tables(self.conn, [(schema, table)]).get((schema, table))
            if found is None:
                raise SourceError(f"table {self.name} does not exist")
            shapes = ShapeRegistry(self.conn, topics)
            shapes.learn(found.relation)
            self.shape: TableShape = shapes.get(found.relation.oid)
            self.key: ChunkKey = chunk_key(self.conn, schema, table)
        except BaseException:
            self.conn.close()
            raise
        self._schema, self._table = schema, table
        self._key_at = [self.shape.columns.index(name) for name in self.key.names]
        self._columns = (*self.shape.columns, "xmin", "ctid")
        self._native = NativeTable.of(self.shape)

    @property
    def topic(self) -> str:
        return self.shape.topic

    def chunk(self, after: KeyText | None, limit: int) -> SourceRead:
        """The next ``limit`` rows after key ``after`` (``None``: from the start)."""
        if self._native is not None and self.key.columns:
            return self._copy(after, limit, self._native)
        query, params = chunk_query(self._schema, self._table, self._columns, self.key,
                                    after, None, limit)
        return self._read(query, params)

    def rows_of(self, keys: Sequence[KeyText]) -> SourceRead:
        """The rows of ``keys`` that exist now."""
        query, params = chunk_query(self._schema, self._table, self._columns, self.key,
                                    None, self.where_keys(keys), len(keys) + 1)
        return self._read(query, params)

    def where_keys(self, keys: Sequence[KeyText]) -> str:
        """SQL text selecting exactly ``keys`` (``(k1, k2) IN ((…), …)``, typed literals)."""
        columns = self.key.columns
        tuples = sql.SQL(", ").join(
            sql.SQL("({})").format(sql.SQL(", ").join(
                sql.SQL("CAST({} AS {})").format(sql.Literal(value),
                                                 sql.Identifier(c.type_schema, c.type_name))
                for c, value in zip(columns, key, strict=True)))
            for key in keys)
        condition = sql.SQL("({}) IN ({})").format(
            sql.SQL(", ").join(sql.Identifier(c.name) for c in columns), tuples)
        return condition.as_string(self.conn)

    def _read(self, query: sql.Composed, params: list[Any]) -> SourceRead:
        before = current_lsn(self.conn)
        values: list[tuple[str | None, ...]] = self.conn.execute(query, params).fetchall()
        after = current_lsn(self.conn)
        rows: list[SourceRow] = []
        names, codecs, keys = self.shape.columns, self.shape.codecs, self.shape.key_indexes
        decoded: list[Any] = []
        for row in values:
            try:  # read_event's fast path ...
                decoded.append({name: None if value is None else codec(value)
                                for name, codec, value in zip(names, codecs, row,
                                                              strict=False)})
            except Exception:  # a value kept as text: the capture's per-column path
                decoded.append(orjson.loads(read_event(self.shape, row[:-2], 0).body)["after"])
        # ... and its JSON encoding (NaN → null …), for the whole chunk in one round trip
        afters: list[dict[str, Any]] = orjson.loads(orjson.dumps(decoded))
        for row, record in zip(values, afters, strict=True):
            rows.append(SourceRow({names[i]: record[names[i]] for i in keys}, record,
                                  tuple(str(row[i]) for i in self._key_at),
                                  f"{row[-2]}@{row[-1]}"))
        return SourceRead(rows, before, after)

    def _copy(self, after: KeyText | None, limit: int, native: NativeTable) -> SourceRead:
        """``chunk`` through ``COPY`` and the native converter (rows without stamps)."""
        query, params = chunk_query(self._schema, self._table, self.shape.columns, self.key,
                                    after, None, limit)
        with psycopg.ClientCursor(self.conn) as cursor:  # the values inlined, for COPY
            statement = cursor.mogrify(sql.SQL("COPY ({}) TO STDOUT").format(query), params)
        before = current_lsn(self.conn)
        data = copy_out(self.conn, statement.encode(self.conn.info.encoding))
        after_lsn = current_lsn(self.conn)
        if not data:
            return SourceRead([], before, after_lsn)
        bodies = native.bodies(data, 0)
        keys: list[dict[str, Any]] = orjson.loads(b"[%s]" % b",".join(k for k, _ in bodies))
        key_texts = _key_texts(data, self._key_at)
        rows = [SourceRow(key, None, key_text, after_json=_after_json(key_json, body))
                for key, key_text, (key_json, body) in zip(keys, key_texts, bodies,
                                                             strict=True)]
        return SourceRead(rows, before, after_lsn)

    def current_lsn(self) -> int:
        """``pg_current_wal_lsn()`` now."""
        return current_lsn(self.conn)

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


_AFTER = b',"before":null,"after":'  # read_event's body: {"op":"r","key":K<_AFTER>A<_END>…
_AFTER_AT = len(b'{"op":"r","key":') + len(_AFTER)
_END = b',"unchanged":'


def _after_json(key_json: bytes, body: bytes) -> bytes:
    """The ``after`` object of a snapshot event's body (``read_event``), as its text."""
    start = _AFTER_AT + len(key_json)
    if body.startswith(_AFTER, start - len(_AFTER)):
        return body[start:body.rindex(_END)]
    return orjson.dumps(orjson.loads(body)["after"])  # a layout this does not know


def _key_texts(data: bytes, key_at: Sequence[int]) -> list[KeyText]:
    """The chunk key of each COPY text line of ``data`` (its columns as text)."""
    lines = data.split(b"\n")
    lines.pop()  # after the last newline
    if len(key_at) == 1 and b"\\" not in data:
        at = key_at[0]
        return [(line.split(b"\t", at + 1)[at].decode(),) for line in lines]
    out: list[KeyText] = []
    for line in lines:
        values = copy_row(line)
        out.append(tuple(str(values[i]) for i in key_at))
    return out
