"""``cdc doctor``: is this database ready for the capture? Each finding says how to fix it."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from cdc.config import PipelineConfig

from .doctor_kafka import kafka_limit_findings
from .findings import Finding, Level
from .schema.ddl import ddl_trigger_findings
from .schema.topics import topic_findings
from .source.privileges import privilege_findings
from .source.publication import catalog_tables
from .source.slot import read_slot
from .source.table_selection import TableSelection, quote_name
from .source.wal_safety import RECREATE_FLAG, wal_retention

__all__ = ["Finding", "Level", "diagnose"]

RETAINED_WAL_WARN_BYTES = 1 << 30


def diagnose(config: PipelineConfig) -> list[Finding]:
    """Run every check against the configured database."""
    with psycopg.connect(config.source.conninfo(), autocommit=True) as conn:
        return [*_wal_level(conn), *_selection(conn, config),
                *privilege_findings(conn, config), *_replica_identity(conn, config),
                *_slot(conn, config), *ddl_trigger_findings(conn),
                *topic_findings(conn, config), *kafka_limit_findings(config)]


def _wal_level(conn: psycopg.Connection[Any]) -> list[Finding]:
    row = conn.execute("SHOW wal_level").fetchone()
    level = row[0] if row else "unknown"
    if level == "logical":
        return [Finding("ok", "wal_level", "logical")]
    return [Finding("error", "wal_level", f"is {level!r}; logical replication needs 'logical'",
                    "ALTER SYSTEM SET wal_level = logical; -- then restart PostgreSQL")]


SHOWN_TABLES = 20  # names listed per finding before "… and N more"


def _names(tables: list[str], shown: int = SHOWN_TABLES) -> str:
    text = ", ".join(tables[:shown])
    return text + (f" … and {len(tables) - shown} more" if len(tables) > shown else "")


def _selection(conn: psycopg.Connection[Any], config: PipelineConfig) -> list[Finding]:
    """What ``source.tables`` selects now: a count and the first names."""
    entries = config.source.tables
    if not entries:
        return [Finding("ok", "tables", "source.tables is empty: every table is captured "
                        "(a publication FOR ALL TABLES)")]
    selection = TableSelection.parse(entries)
    catalog = catalog_tables(conn)
    chosen = [quote_name(s, t) for s, t in selection.resolve(catalog)]
    findings = [Finding("ok" if chosen else "warn", "tables",
                        f"source.tables selects {len(chosen)} tables"
                        + (f": {_names(chosen)}" if chosen else ""),
                        "" if chosen else "check the patterns against the schema")]
    present = {(s, t) for s, t, _ in catalog}
    unmatched = [p.written for p in selection.includes
                 if p.exact is not None and p.exact not in present]
    if unmatched:
        findings.append(Finding("error", "tables", f"configured but not found: "
                                f"{_names(unmatched)}",
                                "create them, or remove them from source.tables"))
    empty = [w for w in selection.unmatched(catalog) if w not in unmatched]
    if empty:
        findings.append(Finding("warn", "tables", f"patterns that select no table: "
                                f"{_names(empty)}", "check their spelling (names are "
                                "case-sensitive; quote odd names: '\"My Schema\".\"T\"')"))
    return findings


def _replica_identity(conn: psycopg.Connection[Any], config: PipelineConfig) -> list[Finding]:
    rows = conn.execute(
        "SELECT n.nspname, c.relname, c.relreplident, c.relispartition,"
        " EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog',"
        " 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'"
        " ORDER BY 1, 2").fetchall()
    selection = TableSelection.parse(config.source.tables)
    problems, fine = [], []
    for schema, table, identity, partition, has_pk in rows:
        if not selection.everything and not selection.selects(schema, table,
                                                               partition=partition):
            continue
        name = f"{schema}.{table}"
        quoted = sql.Identifier(schema, table).as_string(conn)
        if identity == "n":
            problems.append(Finding("error", f"replica identity {name}",
                                    "NOTHING: updates and deletes cannot be published",
                                    f"ALTER TABLE {quoted} REPLICA IDENTITY DEFAULT; "
                                    "-- with a primary key, or FULL"))
        elif identity == "d" and not has_pk:
            problems.append(Finding("error", f"replica identity {name}",
                                    "DEFAULT without a primary key: updates and deletes "
                                    "fail on the source", f"ALTER TABLE {quoted} ADD PRIMARY "
                                    f"KEY (…); -- or REPLICA IDENTITY FULL"))
        else:
            kind = {"d": "DEFAULT (primary key)", "f": "FULL", "i": "USING INDEX"}[identity]
            fine.append(Finding("ok", f"replica identity {name}", kind))
    if len(fine) > SHOWN_TABLES:  # thousands of tables: one line for the good ones
        fine = [Finding("ok", "replica identity", f"{len(fine)} tables can publish updates "
                        "and deletes")]
    return [*problems, *fine]


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
