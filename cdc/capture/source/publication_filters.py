"""What the slot's publications publish of each table: its column list and row filter.

PostgreSQL 15+ lets a publication name the columns it publishes (``FOR TABLE t (a, b)``)
and the rows (``WHERE (…)``); pgoutput then sends only those columns (its Relation message
lists them) and only those rows (an UPDATE moving a row out of the filter is sent as a
DELETE, one moving it in as an INSERT). PostgreSQL 18 also publishes stored generated
columns when ``publish_generated_columns = stored`` or when a column list names them.
The snapshot reads the same columns and rows, so its events equal the stream's.

A table in several publications: the union of their columns, the OR of their filters, and
no filter when any of them has none (PostgreSQL's own rule). ``pg_publication_tables``
gives both (``attnames``, ``rowfilter``: the server's own deparsed expression).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

FILTERS_MIN_VERSION = 150000  # column lists and row filters
GENERATED_MIN_VERSION = 180000  # stored generated columns published (pgoutput sends them)

_PUBLISHED_SQL = (
    "SELECT t.schemaname, t.tablename, t.attnames, t.rowfilter"
    " FROM pg_catalog.pg_publication_tables t"
    " JOIN unnest(%s::text[], %s::text[]) AS wanted(nspname, relname)"
    "  ON wanted.nspname = t.schemaname AND wanted.relname = t.tablename"
    " WHERE t.pubname = ANY(%s::text[]) ORDER BY t.pubname")


@dataclass(frozen=True, slots=True)
class PublishedTable:
    """What the publications publish of one table."""

    columns: frozenset[str] | None  # None: every column pgoutput sends by default
    row_filter: str | None  # None: every row; else SQL text deparsed by the server

    def publishes(self, column: str) -> bool:
        """Whether ``column`` is in the column list (always, without one)."""
        return self.columns is None or column in self.columns


EVERYTHING = PublishedTable(None, None)


def combine(entries: Iterable[tuple[Sequence[str] | None, str | None]]) -> PublishedTable:
    """One table's ``(attnames, rowfilter)`` rows, one per publication, combined:
    the union of the columns, the OR of the filters (none if any row has none)."""
    columns: set[str] = set()
    filters: list[str] = []
    unfiltered = every_column = False
    for attnames, row_filter in entries:
        if attnames is None:
            every_column = True
        else:
            columns.update(attnames)
        if row_filter is None:
            unfiltered = True
        elif row_filter not in filters:
            filters.append(row_filter)
    combined = None if unfiltered or not filters else (
        filters[0] if len(filters) == 1 else " OR ".join(f"({f})" for f in filters))
    return PublishedTable(None if every_column else frozenset(columns), combined)


def published_tables(conn: psycopg.Connection[Any], publications: Sequence[str],
                     tables: Sequence[tuple[str, str]]) -> dict[tuple[str, str],
                                                                  PublishedTable]:
    """The column lists and row filters of ``tables`` in ``publications``, by ``(schema,
    table)``; a table absent (not published, or PostgreSQL < 15) is published whole."""
    if conn.info.server_version < FILTERS_MIN_VERSION or not publications or not tables:
        return {}
    rows = conn.execute(_PUBLISHED_SQL, ([s for s, _ in tables], [t for _, t in tables],
                                         list(publications))).fetchall()
    grouped: dict[tuple[str, str], list[tuple[Sequence[str] | None, str | None]]] = {}
    for schema, table, attnames, row_filter in rows:
        grouped.setdefault((str(schema), str(table)), []).append(
            (None if attnames is None else [str(a) for a in attnames],
             None if row_filter is None else str(row_filter)))
    return {name: combine(entries) for name, entries in grouped.items()}


def column_published(published: PublishedTable, name: str, generated: str,
                     server_version: int) -> bool:
    """Whether pgoutput sends column ``name`` (``generated``: ``pg_attribute.
    attgenerated``, '' for a plain column): generated columns only on PostgreSQL 18+,
    stored ones, when published (PostgreSQL 15 lists them in ``attnames`` without
    sending them)."""
    if generated:
        return (server_version >= GENERATED_MIN_VERSION and generated == "s"
                and published.columns is not None and name in published.columns)
    return published.publishes(name)
