"""``cdc doctor``: is this database ready for the capture? Each finding says how to fix it."""

from __future__ import annotations

from typing import Any

import psycopg

from cdc.config import PipelineConfig

from .ddl import ddl_trigger_findings
from .findings import Finding, Level
from .privileges import privilege_findings
from .slot import read_slot, split_table
from .wal_safety import RECREATE_FLAG, wal_retention

__all__ = ["Finding", "Level", "diagnose"]

RETAINED_WAL_WARN_BYTES = 1 << 30


def diagnose(config: PipelineConfig) -> list[Finding]:
    """Run every check against the configured database."""
    with psycopg.connect(config.source.conninfo(), autocommit=True) as conn:
        return [*_wal_level(conn), *privilege_findings(conn, config),
                *_replica_identity(conn, config),
                *_slot(conn, config), *ddl_trigger_findings(conn)]


def _wal_level(conn: psycopg.Connection[Any]) -> list[Finding]:
    row = conn.execute("SHOW wal_level").fetchone()
    level = row[0] if row else "unknown"
    if level == "logical":
        return [Finding("ok", "wal_level", "logical")]
    return [Finding("error", "wal_level", f"is {level!r}; logical replication needs 'logical'",
                    "ALTER SYSTEM SET wal_level = logical; -- then restart PostgreSQL")]


def _replica_identity(conn: psycopg.Connection[Any], config: PipelineConfig) -> list[Finding]:
    rows = conn.execute(
        "SELECT n.nspname, c.relname, c.relreplident,"
        " EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog',"
        " 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'"
        " ORDER BY 1, 2").fetchall()
    wanted = {".".join(split_table(t)) for t in config.source.tables}
    findings = []
    for schema, table, identity, has_pk in rows:
        name = f"{schema}.{table}"
        if wanted and name not in wanted:
            continue
        quoted = f'"{schema}"."{table}"'
        if identity == "n":
            findings.append(Finding("error", f"replica identity {name}",
                                    "NOTHING: updates and deletes cannot be published",
                                    f"ALTER TABLE {quoted} REPLICA IDENTITY DEFAULT; "
                                    "-- with a primary key, or FULL"))
        elif identity == "d" and not has_pk:
            findings.append(Finding("error", f"replica identity {name}",
                                    "DEFAULT without a primary key: updates and deletes "
                                    "fail on the source", f"ALTER TABLE {quoted} ADD PRIMARY "
                                    f"KEY (…); -- or REPLICA IDENTITY FULL"))
        else:
            kind = {"d": "DEFAULT (primary key)", "f": "FULL", "i": "USING INDEX"}[identity]
            findings.append(Finding("ok", f"replica identity {name}", kind))
    if wanted - {f"{s}.{t}" for s, t, _, _ in rows}:
        missing = ", ".join(sorted(wanted - {f"{s}.{t}" for s, t, _, _ in rows}))
        findings.append(Finding("error", "tables", f"configured but not found: {missing}",
                                "create them, or remove them from source.tables"))
    return findings


def _slot(conn: psycopg.Connection[Any], config: PipelineConfig) -> list[Finding]:
    slot = config.source.slot
    state = read_slot(conn, slot)
    if state is None:
        return [Finding("ok", "slot", f"{slot} does not exist yet; the capture creates it")]
    retention = wal_retention(conn, state)
    detail = f"{slot}: plugin={state.plugin} active={state.active} {retention.describe()}"
    if state.plugin != "pgoutput":
        return [Finding("error", "slot", detail, f"SELECT pg_drop_replication_slot('{slot}');")]
    if retention.level == "error":
        return [Finding("error", "slot", detail + ": WAL it needed was removed, changes were "
                        "missed", f"cdc capture -c <pipeline.yaml> {RECREATE_FLAG} "
                        "-- drops the slot, re-creates it and re-snapshots the tables")]
    if retention.level == "warn":
        return [Finding("warn", "slot", detail + ": close to max_slot_wal_keep_size; past it "
                        "the slot is lost", "start the capture (or find why it does not "
                        "advance: a stopped capture, a blocking consumer), or raise "
                        "max_slot_wal_keep_size")]
    if retention.limit_bytes is None and retention.retained_bytes > RETAINED_WAL_WARN_BYTES:
        return [Finding("warn", "slot", detail + ": the slot holds back a lot of WAL and "
                        "nothing limits it (the disk may fill)", "start the capture (or check "
                        "why it is not advancing); consider max_slot_wal_keep_size")]
    return [Finding("ok", "slot", detail)]
