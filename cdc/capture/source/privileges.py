"""``cdc doctor``'s privilege checks: exactly what the capture's role lacks, and the fix.

The least the capture needs: a role with ``LOGIN REPLICATION``, ``USAGE`` on the schemas
and ``SELECT`` on the published tables (the initial snapshot reads them), and a
publication — created by an admin beforehand, or by the capture when its role may
(``CREATE`` on the database and ownership of the tables; ``FOR ALL TABLES`` needs a
superuser). Heartbeats also need ``EXECUTE`` on ``pg_logical_emit_message``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cdc.config import PipelineConfig

from ..findings import Finding, Level
from .publication import selected_tables

EMIT_MESSAGE = "pg_logical_emit_message(boolean, text, text)"
SHOWN_TABLES = 20  # tables listed one by one before they are summarized per schema


@dataclass(frozen=True, slots=True)
class TableAccess:
    """What the current role may do with one table."""

    schema: str
    table: str
    owns: bool
    select: bool
    schema_usage: bool


def _quoted(conn: psycopg.Connection[Any], *names: str) -> str:
    return sql.Identifier(*names).as_string(conn)


def privilege_findings(conn: psycopg.Connection[Any], config: PipelineConfig) -> list[Finding]:
    """REPLICATION, the publication, SELECT on each table, heartbeats."""
    row = conn.execute("SELECT rolsuper, rolreplication, current_user, current_database() "
                       "FROM pg_roles WHERE rolname = current_user").fetchone()
    assert row is not None
    superuser, replication, role, database = bool(row[0]), bool(row[1]), row[2], row[3]
    findings = []
    if superuser or replication:
        findings.append(Finding("ok", "privileges", f"role {role} may replicate"))
    else:
        findings.append(Finding("error", "privileges",
                                f"role {role} lacks the REPLICATION attribute",
                                f"ALTER ROLE {_quoted(conn, role)} WITH REPLICATION;"))
    findings += _publication(conn, config, role, database, superuser)
    findings += _table_access(conn, config, role)
    if config.source.heartbeat_interval is not None and not superuser:
        signature, allowed = _emit_message_privilege(conn)
        if not allowed:
            findings.append(Finding(
                "warn", "heartbeat", f"role {role} may not call pg_logical_emit_message: "
                "heartbeats are off, an idle slot advances only with keepalives",
                f"GRANT EXECUTE ON FUNCTION {signature} TO {_quoted(conn, role)}; "
                "-- or set source.heartbeat_interval: null"))
    return findings


def _emit_message_privilege(conn: psycopg.Connection[Any]) -> tuple[str, bool]:
    """The text form of ``pg_logical_emit_message`` as this server declares it (three
    arguments before PostgreSQL 17, a fourth, ``flush``, from 17 on) and whether the
    current role may execute it."""
    row = conn.execute(
        "SELECT p.oid::regprocedure::text, has_function_privilege(p.oid, 'EXECUTE') "
        "FROM pg_proc p WHERE p.proname = 'pg_logical_emit_message' "
        "AND p.pronamespace = 'pg_catalog'::regnamespace "
        "AND p.proargtypes[2] = 'text'::regtype ORDER BY p.pronargs LIMIT 1").fetchone()
    if row is None:
        return EMIT_MESSAGE, False
    return str(row[0]), bool(row[1])


def _wanted_tables(conn: psycopg.Connection[Any], config: PipelineConfig) -> list[tuple[str, str]]:
    if config.source.tables:
        return selected_tables(conn, config.source.tables)
    rows = conn.execute("SELECT schemaname, tablename FROM pg_publication_tables "
                        "WHERE pubname = %s ORDER BY 1, 2",
                        (config.source.publication,)).fetchall()
    return [(r[0], r[1]) for r in rows]


def _access(conn: psycopg.Connection[Any], tables: list[tuple[str, str]]) -> list[TableAccess]:
    """One query for all ``tables`` (thousands of them cost one round trip)."""
    rows = conn.execute(
        "SELECT w.sch, w.tab, pg_has_role(c.relowner, 'USAGE'),"
        " has_table_privilege(c.oid, 'SELECT'), has_schema_privilege(ns.oid, 'USAGE')"
        " FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS w(sch, tab, ord)"
        " JOIN pg_namespace ns ON ns.nspname = w.sch"
        " JOIN pg_class c ON c.relnamespace = ns.oid AND c.relname = w.tab ORDER BY w.ord",
        ([s for s, _ in tables], [t for _, t in tables])).fetchall()
    # a missing table is reported by the table selection check
    return [TableAccess(r[0], r[1], bool(r[2]), bool(r[3]), bool(r[4])) for r in rows]


def _publication(conn: psycopg.Connection[Any], config: PipelineConfig, role: str,
                 database: str, superuser: bool) -> list[Finding]:
    name = config.source.publication
    publication = _quoted(conn, name)
    row = conn.execute("SELECT puballtables FROM pg_publication WHERE pubname = %s",
                       (name,)).fetchone()
    tables = _access(conn, selected_tables(conn, config.source.tables))
    listed = ", ".join(_quoted(conn, t.schema, t.table) for t in tables)
    if row is None:
        if not config.source.tables:
            if superuser:
                return [Finding("ok", "publication", f"{name} does not exist yet; the capture "
                                "creates it FOR ALL TABLES")]
            return [Finding("error", "publication", f"{name} does not exist, and only a "
                            "superuser may create a publication FOR ALL TABLES",
                            f"CREATE PUBLICATION {publication} FOR ALL TABLES WITH "
                            "(publish_via_partition_root = true); -- as a superuser; or list "
                            "source.tables")]
        may_create = conn.execute("SELECT has_database_privilege(current_database(), "
                                  "'CREATE')").fetchone()
        not_owned = [t for t in tables if not t.owns]
        if may_create and may_create[0] and not not_owned:
            return [Finding("ok", "publication", f"{name} does not exist yet; the capture "
                            "creates it")]
        reasons = []
        if not (may_create and may_create[0]):
            reasons.append(f"lacks CREATE on database {database}")
        if not_owned:
            reasons.append("does not own " + ", ".join(f"{t.schema}.{t.table}"
                                                        for t in not_owned))
        return [Finding("error", "publication", f"{name} does not exist and role {role} may "
                        f"not create it ({'; '.join(reasons)})",
                        f"CREATE PUBLICATION {publication} FOR TABLE {listed} WITH "
                        "(publish_via_partition_root = true); -- as an admin (the tables' "
                        "owner)")]
    if row[0] or not config.source.tables:
        kind = "FOR ALL TABLES" if row[0] else "the tables it lists"
        return [Finding("ok", "publication", f"{name} exists ({kind})")]
    present = {(s, t) for s, t in conn.execute(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
        (name,)).fetchall()}
    missing = [t for t in tables if (t.schema, t.table) not in present]
    blocked = [t for t in missing if not t.owns]
    if not blocked:
        extra = (f"; the capture adds {', '.join(f'{t.schema}.{t.table}' for t in missing)}"
                 if missing else "")
        return [Finding("ok", "publication", f"{name} exists{extra}")]
    return [Finding("error", "publication", f"{name} lacks "
                    f"{', '.join(f'{t.schema}.{t.table}' for t in blocked)} and role {role} "
                    "may not add them (not their owner)",
                    f"ALTER PUBLICATION {publication} ADD TABLE "
                    f"{', '.join(_quoted(conn, t.schema, t.table) for t in blocked)}; "
                    "-- as the tables' owner")]


def _table_access(conn: psycopg.Connection[Any], config: PipelineConfig,
                  role: str) -> list[Finding]:
    tables = _access(conn, _wanted_tables(conn, config))
    level: Level = "warn" if config.source.snapshot == "never" else "error"
    findings = []
    for schema in sorted({t.schema for t in tables if not t.schema_usage}):
        findings.append(Finding(level, f"schema {schema}", f"role {role} lacks USAGE on "
                                f"schema {schema}", f"GRANT USAGE ON SCHEMA "
                                f"{_quoted(conn, schema)} TO {_quoted(conn, role)};"))
    lacking = [t for t in tables if not t.select]
    if len(lacking) > SHOWN_TABLES:  # thousands of tables: one finding per schema
        for schema in sorted({t.schema for t in lacking}):
            names = [t.table for t in lacking if t.schema == schema]
            shown = ", ".join(names[:SHOWN_TABLES]) + (
                f" … and {len(names) - SHOWN_TABLES} more" if len(names) > SHOWN_TABLES else "")
            findings.append(Finding(level, f"select {schema}.*", f"role {role} lacks SELECT "
                                    f"on {len(names)} tables of schema {schema} (snapshots "
                                    f"read them): {shown}", f"GRANT SELECT ON ALL TABLES IN "
                                    f"SCHEMA {_quoted(conn, schema)} TO {_quoted(conn, role)};"))
        lacking = []
    for t in lacking:
        if not t.select:
            findings.append(Finding(level, f"select {t.schema}.{t.table}", f"role {role} "
                                    f"lacks SELECT on {t.schema}.{t.table} (snapshots read it)",
                                    f"GRANT SELECT ON {_quoted(conn, t.schema, t.table)} TO "
                                    f"{_quoted(conn, role)};"))
    if not findings:
        findings.append(Finding("ok", "select", f"role {role} may read the {len(tables)} "
                                "captured tables"))
    return findings
