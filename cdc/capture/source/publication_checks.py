"""``cdc doctor`` on the publication's column lists and row filters (PostgreSQL 15+) and
published generated columns (18+): what each table publishes, and whether updates and
deletes can be published at all (the column list must hold the replica identity)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from cdc.config.source import SourceConfig

from ..findings import Finding
from .publication_filters import FILTERS_MIN_VERSION, PublishedTable, column_published, combine

__all__ = ["publication_filter_findings"]

SHOWN_TABLES = 20  # tables with a column list or row filter listed one by one

# per published table: its columns (name, attgenerated) and replica identity columns
_TABLES_SQL = """
SELECT t.schemaname, t.tablename, t.attnames, t.rowfilter, c.relreplident,
       ARRAY(SELECT a.attname || ':' || a.attgenerated::text FROM pg_attribute a
             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
             ORDER BY a.attnum),
       ARRAY(SELECT a.attname FROM pg_index i JOIN pg_attribute a
             ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
             WHERE i.indrelid = c.oid AND CASE c.relreplident WHEN 'i' THEN i.indisreplident
                   WHEN 'd' THEN i.indisprimary ELSE false END ORDER BY a.attnum)
FROM pg_catalog.pg_publication_tables t
JOIN pg_namespace n ON n.nspname = t.schemaname
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.tablename
WHERE t.pubname = %s ORDER BY 1, 2
"""


def publication_filter_findings(conn: psycopg.Connection[Any],
                                source: SourceConfig) -> list[Finding]:
    """Per table with a column list or row filter: what it publishes; a warning when the
    column list leaves out replica identity columns. Nothing before PostgreSQL 15 or
    while the publication does not exist."""
    version = conn.info.server_version
    if version < FILTERS_MIN_VERSION:
        return []
    name = source.publication
    actions = conn.execute("SELECT pubupdate OR pubdelete FROM pg_publication "
                           "WHERE pubname = %s", (name,)).fetchone()
    if actions is None:
        return []
    shown: list[Finding] = []
    problems: list[Finding] = []
    whole = 0
    for schema, table, attnames, row_filter, identity, columns, key in \
            conn.execute(_TABLES_SQL, (name,)).fetchall():
        published = combine([(attnames, row_filter)])
        sent = _sent_columns(published, columns, version)
        plain = [c for c, generated in (_split(c) for c in columns) if not generated]
        if sent == plain and row_filter is None:
            whole += 1
            continue
        qualified = f"{schema}.{table}"
        shown.append(Finding("ok", f"published {qualified}", _describe(sent, plain, row_filter)))
        needed = plain if identity == "f" else [str(k) for k in key]
        missing = [c for c in needed if c not in sent]
        if actions[0] and missing:
            problems.append(_identity_problem(conn, name, schema, table, sent, missing,
                                              row_filter))
    if len(shown) > SHOWN_TABLES:
        rest = len(shown) - SHOWN_TABLES
        shown = [*shown[:SHOWN_TABLES], Finding("ok", "published", f"… and {rest} more "
                                                "tables with a column list or row filter")]
    tables = "table" if whole == 1 else "tables"
    summary = Finding("ok", "published", f"publication {name}: {whole} {tables} published "
                      "whole (every column, every row)" if shown or whole else
                      f"publication {name} publishes no table yet")
    return [*problems, *shown, summary]


def _split(entry: str) -> tuple[str, str]:
    """``name:attgenerated`` (as the query joins them) → ``(name, attgenerated)``."""
    column, _, generated = str(entry).rpartition(":")
    return column, generated


def _sent_columns(published: PublishedTable, columns: list[str], version: int) -> list[str]:
    """The columns pgoutput sends, in table order."""
    return [c for c, generated in (_split(e) for e in columns)
            if column_published(published, c, generated, version)]


def _describe(sent: list[str], plain: list[str], row_filter: str | None) -> str:
    """``columns a, b (not c); rows where (…)``."""
    listed = "every column"
    if sent != plain:
        left_out = [c for c in plain if c not in sent]
        generated = [c for c in sent if c not in plain]
        listed = (f"columns {', '.join(sent)}"
                  + (f" (not {', '.join(left_out)})" if left_out else "")
                  + (f" (generated: {', '.join(generated)})" if generated else ""))
    return f"{listed}; " + (f"rows where {row_filter}" if row_filter else "every row")


def _identity_problem(conn: psycopg.Connection[Any], publication: str, schema: str,
                      table: str, sent: list[str], missing: list[str],
                      row_filter: str | None) -> Finding:
    columns = sql.SQL(", ").join(sql.Identifier(c) for c in [*sent, *missing])
    name = sql.Identifier(schema, table)
    where = sql.SQL(" WHERE ({})").format(sql.SQL(row_filter)) if row_filter else sql.SQL("")
    # row_filter: the server's own deparsed expression, not user input
    fix = sql.SQL("BEGIN; ALTER PUBLICATION {pub} DROP TABLE {table}; ALTER PUBLICATION "
                  "{pub} ADD TABLE {table} ({columns}){where}; COMMIT;").format(
        pub=sql.Identifier(publication), table=name, columns=columns, where=where)
    return Finding("warn", f"published {schema}.{table}", f"the column list of publication "
                   f"{publication} leaves out replica identity columns "
                   f"{', '.join(missing)}: UPDATE and DELETE on {schema}.{table} fail on the "
                   "server (\"column list used by the publication does not cover the "
                   "replica identity\")", fix.as_string(conn))
