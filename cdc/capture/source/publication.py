"""The publication, kept to match ``source.tables`` (names, glob patterns, exclusions).

At start-up, and every few seconds while streaming, the capture matches the patterns
against the catalog and adds what the publication lacks: a schema selected whole
(``public.*``, no exclusion touching it) becomes ``FOR TABLES IN SCHEMA`` on PostgreSQL
15+ when the role may (a superuser), so new tables join by themselves; any other match is
listed by name, in batches (also on a publication that has column lists: PostgreSQL adds
no schema to one). A table added by name later is snapshotted incrementally
(``incremental``): its rows written before it joined were never streamed. Tables the
patterns stop selecting are left in the publication (``cdc doctor`` names them).

A publication made by the user is never rewritten: tables already in it keep their column
lists and row filters (PostgreSQL 15+), which the capture honours
(``publication_filters``); only tables the patterns select and it lacks are added, whole.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from psycopg import sql

from ..findings import MissingPrivilegeError
from .ddl_race import CatalogRaceError, outlast_ddl
from .table_selection import TableSelection

log = logging.getLogger(__name__)

ADD_BATCH = 500  # tables per ALTER PUBLICATION … ADD TABLE
_WARNED: set[str] = set()  # publication problems already logged while streaming
CATALOG_QUERY = (
    "SELECT n.nspname, c.relname, c.relispartition FROM pg_class c"
    " JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.relkind IN ('r', 'p') AND c.relpersistence = 'p'"
    " AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%'")


def catalog_tables(conn: psycopg.Connection[Any]) -> list[tuple[str, str, bool]]:
    """Every table a publication may hold: ``(schema, table, is_partition)``."""
    return [(str(s), str(t), bool(p)) for s, t, p in conn.execute(CATALOG_QUERY).fetchall()]


def selected_tables(conn: psycopg.Connection[Any], entries: tuple[str, ...]
                    ) -> list[tuple[str, str]]:
    """The tables ``source.tables`` selects now (exact names need no catalog)."""
    selection = TableSelection.parse(entries)
    if selection.exact_only:
        return [exact for p in selection.patterns if (exact := p.exact) is not None]
    return selection.resolve(catalog_tables(conn))


def published_relations(conn: psycopg.Connection[Any], publication: str) -> dict[str, int]:
    """Every table ``publication`` publishes now (by name, schema or FOR ALL TABLES):
    ``"schema.table"`` → relation oid."""
    rows = outlast_ddl(lambda: conn.execute(
        "SELECT c.oid, n.nspname, c.relname FROM pg_publication_tables t"
        " JOIN pg_namespace n ON n.nspname = t.schemaname"
        " JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.tablename"
        " WHERE t.pubname = %s", (publication,)).fetchall(),
        what=f"listing the tables of publication {publication}")
    return {f"{schema}.{table}": int(oid) for oid, schema, table in rows}


def tables_added_by_name(conn: psycopg.Connection[Any], publication: str) -> set[str]:
    """Tables that are members of ``publication`` by name (ALTER PUBLICATION … ADD TABLE,
    or source.tables), not through FOR ALL TABLES or a schema."""
    rows = outlast_ddl(lambda: conn.execute(
        "SELECT n.nspname, c.relname FROM pg_publication_rel r"
        " JOIN pg_publication p ON p.oid = r.prpubid"
        " JOIN pg_class c ON c.oid = r.prrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE p.pubname = %s",
        (publication,)).fetchall(),
        what=f"listing the tables added to publication {publication}")
    return {f"{schema}.{table}" for schema, table in rows}


def _schema_form(conn: psycopg.Connection[Any], selection: TableSelection,
                 publication: str) -> tuple[str, ...]:
    """Schemas to publish ``FOR TABLES IN SCHEMA`` (PostgreSQL 15+, as a superuser, and
    not into a publication with column lists: PostgreSQL refuses that)."""
    schemas = selection.whole_schemas()
    if not schemas or conn.info.server_version < 150000:
        return ()
    row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    if row is None or not row[0]:
        return ()
    listed = conn.execute("SELECT 1 FROM pg_publication_rel r JOIN pg_publication p"
                          " ON p.oid = r.prpubid WHERE p.pubname = %s"
                          " AND r.prattrs IS NOT NULL LIMIT 1", (publication,)).fetchone()
    return () if listed is not None else schemas


def ensure_publication(conn: psycopg.Connection[Any], publication: str,
                       tables: tuple[str, ...]) -> list[tuple[str, str]]:
    """Create the publication to match ``tables`` (empty: FOR ALL TABLES) or add what it
    lacks; returns the tables added by name."""
    selection = TableSelection.parse(tables)
    row = conn.execute("SELECT puballtables FROM pg_publication WHERE pubname = %s",
                       (publication,)).fetchone()
    if row is not None and (row[0] or selection.everything):
        return []
    schemas = _schema_form(conn, selection, publication)
    wanted = [t for t in selected_tables(conn, tables) if t[0] not in schemas]
    name = sql.Identifier(publication)
    if row is None:
        objects = []
        if schemas:
            objects.append(sql.SQL("TABLES IN SCHEMA {}").format(
                sql.SQL(", ").join(map(sql.Identifier, schemas))))
        if wanted:
            objects.append(sql.SQL("TABLE {}").format(
                sql.SQL(", ").join(sql.Identifier(*t) for t in wanted)))
        target = (sql.SQL("FOR ALL TABLES") if selection.everything
                  else sql.SQL("FOR ") + sql.SQL(", ").join(objects) if objects else sql.SQL(""))
        create = sql.SQL("CREATE PUBLICATION {} {} WITH (publish_via_partition_root = true)"
                         ).format(name, target)
        as_admin_if_denied(conn, create, f"publication {publication!r} does not exist and "
                           "this role may not create it")
        log.info("created publication %s (%d schemas, %d tables by name)", publication,
                 len(schemas), len(wanted))
        return wanted
    if schemas:
        present_schemas = {r[0] for r in conn.execute(
            "SELECT n.nspname FROM pg_publication_namespace pn JOIN pg_publication p"
            " ON p.oid = pn.pnpubid JOIN pg_namespace n ON n.oid = pn.pnnspid"
            " WHERE p.pubname = %s", (publication,)).fetchall()}
        for schema in schemas:
            if schema not in present_schemas:
                as_admin_if_denied(conn, sql.SQL("ALTER PUBLICATION {} ADD TABLES IN SCHEMA {}")
                                   .format(name, sql.Identifier(schema)),
                                   f"publication {publication!r} lacks schema {schema}")
                log.info("added schema %s to publication %s", schema, publication)
    present = {(s, t) for s, t in conn.execute(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
        (publication,)).fetchall()}
    missing = [t for t in wanted if t not in present]
    for start in range(0, len(missing), ADD_BATCH):
        batch = missing[start:start + ADD_BATCH]
        alter = sql.SQL("ALTER PUBLICATION {} ADD TABLE {}").format(
            name, sql.SQL(", ").join(sql.Identifier(*t) for t in batch))
        as_admin_if_denied(conn, alter, f"publication {publication!r} lacks "
                           f"{_some(batch)} and this role may not add them")
    if missing:
        log.info("added %d tables to publication %s: %s", len(missing), publication,
                 _some(missing))
    return missing


def _some(tables: list[tuple[str, str]], shown: int = 5) -> str:
    names = ", ".join(f"{s}.{t}" for s, t in tables[:shown])
    return names + (f" and {len(tables) - shown} more" if len(tables) > shown else "")


def as_admin_if_denied(conn: psycopg.Connection[Any], statement: sql.Composed,
                       problem: str) -> None:
    """Run ``statement``; if the role may not, say which statement an admin should run."""
    try:
        conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege as exc:
        shown = statement.as_string(conn)
        if len(shown) > 2000:
            shown = shown[:2000] + " …"
        raise MissingPrivilegeError(
            f"{problem} ({exc.diag.message_primary}). Ask an admin to run: "
            f"{shown}; ('cdc doctor' lists every missing privilege)") from None


def needs_sync(tables: tuple[str, ...]) -> bool:
    """Whether new tables may have to be added to the publication by the capture."""
    selection = TableSelection.parse(tables)
    return not selection.everything and not selection.exact_only


def sync_publication(conn: psycopg.Connection[Any], publication: str,
                     tables: tuple[str, ...]) -> None:
    """While streaming: add the tables created since that the patterns select. A failure
    is logged, never raised (a lost connection excepted): the capture goes on."""
    if not needs_sync(tables):
        return
    try:
        outlast_ddl(lambda: ensure_publication(conn, publication, tables),
                    what=f"adding new tables to publication {publication}")
    except MissingPrivilegeError as exc:
        if str(exc) not in _WARNED:  # once per problem, not every few seconds
            _WARNED.add(str(exc))
            log.warning("new tables match source.tables but cannot be published: %s", exc)
    except (psycopg.OperationalError, CatalogRaceError):
        raise  # the server is gone, or DDL keeps racing: the session reconnects
    except psycopg.Error as exc:  # anything else: logged, tried again next time
        log.warning("adding new tables to publication %s failed: %s; retrying later",
                    publication, str(exc).strip())
