"""The catalog of many tables in one query, and telling whether a table changed since.

The initial snapshot learns every table's shape with one query (not two per table), from
the *current* catalog. When a table's turn comes, inside the exported snapshot,
``TableCheck`` compares what the snapshot and the catalog say now: a table dropped, one
rewritten or truncated (a new relfilenode: the old snapshot would see it empty), or one
whose columns changed (``SELECT * … LIMIT 0`` describes the columns as they are now).

Given the slot's publication, a table's relation holds only the columns pgoutput sends
(its column list; stored generated columns on PostgreSQL 18 when published) and its row
filter is kept, so ``snapshot_query`` reads exactly the rows and columns the stream carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import psycopg
from psycopg import sql

from ..pgoutput import Column, Relation
from ..source.publication_filters import EVERYTHING, column_published, published_tables

# every column as SELECT * returns it: (name, type oid, typmod); domains as their base
StarColumns = tuple[tuple[str, int, int], ...]

_TABLES_SQL = """
SELECT n.nspname, c.relname, c.oid, c.relreplident, c.relkind,
       CASE WHEN c.relkind = 'p' THEN NULL ELSE pg_relation_size(c.oid) END,
       c.reltuples::bigint,
       a.attname, a.atttypid, a.atttypmod, a.attgenerated::text,
       coalesce(a.attnum = ANY(i.indkey), false),
       CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END,
       CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END
FROM unnest(%s::text[], %s::text[]) AS wanted(nspname, relname)
JOIN pg_namespace n ON n.nspname = wanted.nspname
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = wanted.relname
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_index i ON i.indrelid = c.oid
 AND CASE c.relreplident WHEN 'i' THEN i.indisreplident ELSE i.indisprimary END
ORDER BY c.oid, a.attnum
"""


@dataclass(frozen=True, slots=True)
class CatalogTable:
    """One table as the catalog describes it now."""

    relation: Relation  # like pgoutput's: generated columns left out
    star: StarColumns  # what SELECT * returns
    size_bytes: int | None  # None: partitioned (the size is its partitions')
    estimated_rows: int | None
    row_filter: str | None = None  # the publication's (the server's deparsed SQL)

    @property
    def name(self) -> str:
        return f"{self.relation.namespace}.{self.relation.name}"


def _flagged(identity: str, in_index: bool) -> bool:  # as pgoutput flags replica identity
    return identity == "f" or (identity in ("d", "i") and in_index)


def catalog_tables(conn: psycopg.Connection[Any], tables: list[tuple[str, str]],
                   publication: str | None = None) -> dict[tuple[str, str], CatalogTable]:
    """The tables of ``tables`` that exist, by (schema, table), in one query (and one
    for ``publication``'s column lists and row filters, on PostgreSQL 15+)."""
    version = conn.info.server_version
    published = published_tables(conn, [publication] if publication else [], tables)
    rows = conn.execute(_TABLES_SQL, ([s for s, _ in tables], [t for _, t in tables]))
    grouped: dict[int, list[tuple[Any, ...]]] = {}
    for row in rows.fetchall():
        grouped.setdefault(int(row[2]), []).append(row)
    found: dict[tuple[str, str], CatalogTable] = {}
    for oid, group in grouped.items():
        schema, table, _, identity, kind, size, estimate = group[0][:7]
        publishes = published.get((schema, table), EVERYTHING)
        columns = tuple(Column(_flagged(identity, bool(key)), name, int(typ), int(mod))
                        for *_, name, typ, mod, generated, key, _, _ in group
                        if name is not None
                        and column_published(publishes, name, generated or "", version))
        star = tuple((name, int(base), int(base_mod))
                     for *_, name, _, _, _, _, base, base_mod in group if name is not None)
        found[schema, table] = CatalogTable(
            Relation(oid, schema, table, str(identity), columns), star,
            None if kind == "p" else int(size or 0),
            int(estimate) if estimate is not None and int(estimate) > 0 else None,
            publishes.row_filter)
    return found


def planned_rows(conn: psycopg.Connection[Any], schema: str, table: str) -> int | None:
    """The planner's estimate of the table's rows (``EXPLAIN SELECT FROM``), None when it
    no longer exists. Unlike ``pg_class.reltuples`` (0 or -1 until the first VACUUM or
    ANALYZE) the planner sizes a never-analyzed table by its pages, and a partitioned one
    by its partitions."""
    query = sql.SQL("EXPLAIN (FORMAT JSON) SELECT FROM {}").format(
        sql.Identifier(schema, table))
    try:
        row = conn.execute(query).fetchone()
    except psycopg.errors.UndefinedTable:
        return None
    assert row is not None
    plan = orjson.loads(row[0]) if isinstance(row[0], str | bytes) else row[0]
    return int(plan[0]["Plan"]["Plan Rows"])


@dataclass(frozen=True, slots=True)
class PageRange:
    """Pages ``[first, end)`` of a table (``end`` None: to its end), read by
    ``ctid`` (a TID range scan, PostgreSQL 14+)."""

    first: int
    end: int | None


def page_ranges(size_bytes: int, block_size: int, range_bytes: int) -> list[PageRange]:
    """A table of ``size_bytes`` cut into ranges of about ``range_bytes``; one range (the
    whole table) when it is not bigger than that. The last range is open: pages added
    since the size was read are in it."""
    pages = size_bytes // block_size
    count = -(-pages * block_size // range_bytes) if size_bytes > range_bytes else 1
    if count < 2:
        return [PageRange(0, None)]
    step = -(-pages // count)
    bounds = list(range(0, pages, step))
    return [PageRange(first, end) for first, end in zip(bounds, [*bounds[1:], None],
                                                        strict=True)]


def snapshot_query(schema: str, table: str, columns: tuple[str, ...],
                   row_filter: str | None, pages: PageRange | None = None) -> sql.Composed:
    """``SELECT columns FROM schema.table`` [``WHERE row_filter``] [and only the rows in
    ``pages``]: the rows and columns the publication publishes."""
    query = sql.SQL("SELECT {} FROM {}").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in columns), sql.Identifier(schema, table))
    conditions: list[sql.Composable] = []
    if row_filter is not None:
        # the server's own deparsed expression (pg_publication_tables.rowfilter), not user
        # input
        conditions.append(sql.SQL("({})").format(sql.SQL(row_filter)))
    if pages is not None:
        conditions.append(sql.SQL("ctid >= {}::tid").format(sql.Literal(f"({pages.first},0)")))
        if pages.end is not None:
            conditions.append(sql.SQL("ctid < {}::tid").format(sql.Literal(f"({pages.end},0)")))
    if not conditions:
        return query
    return query + sql.SQL(" WHERE ") + sql.SQL(" AND ").join(conditions)


@dataclass(frozen=True, slots=True)
class TableCheck:
    """A table at its turn, inside the exported snapshot (its ACCESS SHARE lock taken)."""

    in_snapshot: bool  # False: created after the snapshot (it holds none of its rows)
    dropped: bool  # the relation is gone (dropped, or the name is another table's now)
    rewritten: bool  # a new relfilenode: the snapshot would read it empty
    star: StarColumns  # SELECT * now

    @classmethod
    def run(cls, cursor: psycopg.Cursor[Any], schema: str, table: str, oid: int,
            savepoint: sql.Composable) -> TableCheck:
        """One round trip: the savepoint statements, the lock and columns (``SELECT *``),
        the relfilenodes then and now."""
        previous = None
        cursor.execute(sql.SQL(
            "{}; SELECT * FROM {} LIMIT 0; SELECT c.relkind, c.relfilenode, "
            "pg_relation_filenode(c.oid) FROM pg_class c WHERE c.oid = {}").format(
                savepoint, sql.Identifier(schema, table), sql.Literal(oid)))
        described = cursor.pgresult
        while cursor.nextset():  # the savepoint statements first: the last two matter
            previous, described = described, cursor.pgresult
        result = previous
        assert result is not None
        star = tuple(((result.fname(i) or b"").decode(), result.ftype(i), result.fmod(i))
                     for i in range(result.nfields))
        row = cursor.fetchone()
        if row is None:
            return cls(False, False, False, star)
        kind, then, now = row
        if kind == "p":
            return cls(True, False, False, star)
        return cls(True, now is None, now is not None and int(now) != int(then), star)


def published_table(conn: psycopg.Connection[Any], schema: str, table: str,
                    publication: str | None) -> CatalogTable:
    """One table as ``catalog_tables`` describes it (the relation pgoutput would send
    through ``publication``, and its row filter); LookupError when it does not exist."""
    found = catalog_tables(conn, [(schema, table)], publication).get((schema, table))
    if found is None:
        raise LookupError(f"table {schema}.{table} not found")
    return found
