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
from cdc.capture.snapshot.native import NativeTable
from cdc.capture.source import session
from cdc.config.topic_names import TopicNamer
from cdc.errors import SourceError

from .copy_out import copy_out_between
from .rows import KeyText, SourceRow, copy_rows

__all__ = ["KeyText", "SourceRead", "SourceRow", "TableSource", "current_lsn"]

@dataclass(frozen=True, slots=True)
class SourceRead:
    """Rows read by one statement and the WAL positions around it."""

    rows: list[SourceRow]
    before_lsn: int
    after_lsn: int


_LSN_QUERY = b"SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"


def current_lsn(conn: psycopg.Connection[Any]) -> int:
    """``pg_current_wal_lsn()`` as an integer."""
    row = conn.execute(_LSN_QUERY).fetchone()
    assert row is not None
    return int(row[0])


class TableSource:
    """One table, read in chunks of its key (``cdc.capture.snapshot.chunks``)."""

    def __init__(self, dsn: str, schema: str, table: str, topics: TopicNamer,
                 publication: str | None = None) -> None:
        """``publication``: the capture's; its column list and row filter (PostgreSQL
        15+) decide which columns and rows the sinks can hold, as for the snapshot."""
        self.name = f"{schema}.{table}"
        self.conn = session.connect(dsn)
        try:
            found = catalog_tables(self.conn, [(schema, table)],
                                   publication).get((schema, table))
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
        self._row_filter = found.row_filter
        self._key_at = [self.shape.columns.index(name) for name in self.key.names]
        self._key_names = [self.shape.columns[i] for i in self.shape.key_indexes]
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
                                    after, None, limit, self._row_filter)
        return self._read(query, params)

    def rows_of(self, keys: Sequence[KeyText]) -> SourceRead:
        """The rows of ``keys`` that exist now."""
        query, params = chunk_query(self._schema, self._table, self._columns, self.key,
                                    None, self.where_keys(keys), len(keys) + 1,
                                    self._row_filter)
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
                                    after, None, limit, self._row_filter)
        with psycopg.ClientCursor(self.conn) as cursor:  # the values inlined, for COPY
            statement = cursor.mogrify(sql.SQL("COPY ({}) TO STDOUT").format(query), params)
        # the WAL positions around the COPY, read in the same round trip
        before_text, data, after_text = copy_out_between(
            self.conn, _LSN_QUERY, statement.encode(self.conn.info.encoding), _LSN_QUERY)
        before, after_lsn = int(before_text or 0), int(after_text or 0)
        if not data:
            return SourceRead([], before, after_lsn)
        rows = copy_rows(data, native.bodies(data, 0), self._key_names, self._key_at)
        return SourceRead(rows, before, after_lsn)

    def current_lsn(self) -> int:
        """``pg_current_wal_lsn()`` now."""
        return current_lsn(self.conn)

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

