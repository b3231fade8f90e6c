"""Reading a table in key order, one chunk at a time (keyset pagination on its key).

The chunk key is the primary key, else a unique index over NOT NULL columns (the
replica-identity index first). Any key type works — composite, uuid, text, enum: the
last key is kept as text and cast back to each column's type, and a row comparison
``(k1, k2) > (…)`` follows the same btree order as ``ORDER BY k1, k2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cdc.errors import SourceError, TerminalError


class NoChunkKeyError(SourceError, TerminalError):
    """The table has neither a primary key nor a unique index over NOT NULL columns."""


@dataclass(frozen=True, slots=True)
class KeyColumn:
    """One column of the chunk key and its type (schema-qualified, for casts)."""

    name: str
    type_schema: str
    type_name: str


@dataclass(frozen=True, slots=True)
class ChunkKey:
    """The columns a table is paginated by, in index order."""

    columns: tuple[KeyColumn, ...]
    index: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


WHOLE_TABLE = ChunkKey((), "")  # no key to paginate by: the whole table is one chunk


def table_oid(conn: psycopg.Connection[Any], schema: str, table: str) -> int:
    """The oid of ``schema.table``; SourceError naming the table when it does not exist."""
    row = conn.execute("SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = "
                       "c.relnamespace WHERE n.nspname = %s AND c.relname = %s "
                       "AND c.relkind IN ('r', 'p')", (schema, table)).fetchone()
    if row is None:
        raise SourceError(f"table {schema}.{table} does not exist (check --table: "
                          "'schema.table', as PostgreSQL spells it)")
    return int(row[0])


def chunk_key(conn: psycopg.Connection[Any], schema: str, table: str) -> ChunkKey:
    """The key to paginate ``schema.table`` by; NoChunkKeyError when it has none."""
    oid = table_oid(conn, schema, table)
    rows = conn.execute(
        "SELECT i.indexrelid::regclass::text, a.attname, tn.nspname, t.typname, a.attnotnull"
        " FROM pg_index i"
        " JOIN LATERAL unnest(i.indkey[0:i.indnkeyatts - 1]) WITH ORDINALITY AS k(attnum, n)"
        "  ON true"
        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
        " JOIN pg_type t ON t.oid = a.atttypid JOIN pg_namespace tn ON tn.oid = t.typnamespace"
        " WHERE i.indrelid = %s AND i.indisunique AND i.indisvalid AND i.indpred IS NULL"
        "  AND i.indexprs IS NULL"
        " ORDER BY i.indisprimary DESC, i.indisreplident DESC, i.indexrelid, k.n",
        (oid,)).fetchall()
    indexes: dict[str, list[tuple[str, str, str, bool]]] = {}
    for index, name, type_schema, type_name, not_null in rows:
        indexes.setdefault(index, []).append((name, type_schema, type_name, bool(not_null)))
    for index, columns in indexes.items():  # in preference order
        if all(not_null for *_, not_null in columns):
            return ChunkKey(tuple(KeyColumn(n, s, t) for n, s, t, _ in columns), index)
    raise NoChunkKeyError(
        f"table {schema}.{table} has no primary key and no unique index over NOT NULL "
        "columns, so it cannot be read in key order; add one (ALTER TABLE "
        f"{schema}.{table} ADD PRIMARY KEY (…)) and request the snapshot again")


def _as_output_text(column: str) -> sql.Composed:
    """``column`` as its type's output function writes it — what COPY and pgoutput send.
    Not ``::text``: a cast to text has functions of its own for some types (boolean
    ``true`` for ``t``, ``char(n)`` without its padding, ``inet`` with ``/32``).
    ``format('%s')`` calls the output function, and turns NULL into '', hence the CASE."""
    name = sql.Identifier(column)
    return sql.SQL("CASE WHEN {} IS NULL THEN NULL ELSE format('%%s', {}) END").format(
        name, name)


def chunk_query(schema: str, table: str, columns: tuple[str, ...], key: ChunkKey,
                after: tuple[str, ...] | None, where: str | None,
                limit: int, row_filter: str | None = None) -> tuple[sql.Composed, list[Any]]:
    """SELECT the next ``limit`` rows after key ``after`` (text values), every column as
    text, in key order; ``where`` is the operator's own filter (SQL text, as given),
    ``row_filter`` the publication's (only the rows the stream carries)."""
    conditions: list[sql.Composable] = []
    if row_filter:
        # the server's own deparsed expression (pg_publication_tables.rowfilter), not
        # user input ('%' doubled: the query has parameters)
        conditions.append(sql.SQL("({})").format(sql.SQL(row_filter.replace("%", "%%"))))
    params: list[Any] = []
    if after is not None:
        conditions.append(sql.SQL("({}) > ({})").format(
            sql.SQL(", ").join(sql.Identifier(c.name) for c in key.columns),
            sql.SQL(", ").join(sql.SQL("CAST(%s AS {})").format(
                sql.Identifier(c.type_schema, c.type_name)) for c in key.columns)))
        params.extend(after)
    if where:
        # the operator's own filter, as given ('%' doubled: the query has parameters)
        conditions.append(sql.SQL("({})").format(sql.SQL(where.replace("%", "%%"))))
    filters = (sql.SQL(" WHERE ") + sql.SQL(" AND ").join(conditions)) if conditions \
        else sql.SQL("")
    texts = sql.SQL(", ").join(_as_output_text(c) for c in columns)
    if not key.columns:  # WHOLE_TABLE: every row at once
        return sql.SQL("SELECT {} FROM {}{}").format(
            texts, sql.Identifier(schema, table), filters), params
    query = sql.SQL("SELECT {} FROM {}{} ORDER BY {} LIMIT {}").format(
        texts,
        sql.Identifier(schema, table), filters,  # qualified: not the text output columns
        sql.SQL(", ").join(sql.Identifier(table, c.name) for c in key.columns),
        sql.Literal(limit))
    return query, params
