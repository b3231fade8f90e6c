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
from .source.publication_checks import publication_filter_findings
from .source.replicas import takeover_findings
from .source.slot import FAILOVER_MIN_VERSION, read_slot, slot_failover, slot_two_phase
from .source.standby_checks import standby_findings
from .source.table_selection import TableSelection, quote_name
from .source.wal_safety import RECREATE_FLAG, wal_retention

__all__ = ["Finding", "Level", "diagnose", "failover_findings", "standby_settings"]

RETAINED_WAL_WARN_BYTES = 1 << 30


def diagnose(config: PipelineConfig) -> list[Finding]:
    """Run every check against the configured database."""
    with psycopg.connect(config.source.conninfo(), autocommit=True) as conn:
        return [*_wal_level(conn), *_selection(conn, config),
                *privilege_findings(conn, config),
                *publication_filter_findings(conn, config.source),
                *_replica_identity(conn, config),
                *_slot(conn, config), *failover_findings(conn, config),
                *standby_findings(conn, config.source), *takeover_findings(conn),
                *ddl_trigger_findings(conn),
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
    flags = f" two_phase={slot_two_phase(conn, slot)}"
    failover = slot_failover(conn, slot)
    if failover is not None:
        flags += f" failover={failover}"
    detail = (f"{slot}: plugin={state.plugin} active={state.active}{flags} "
              f"{retention.describe()}")
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


def standby_settings(dbname: str | None) -> str:
    """What a standby needs (postgresql.conf) to keep the failover slot synchronised."""
    return ("on the standby: sync_replication_slots = on; hot_standby_feedback = on; "
            "primary_slot_name = '<the standby's physical slot>'; primary_conninfo = "
            f"'host=<primary> … dbname={dbname or '<database>'}' (dbname is required)")


def failover_findings(conn: psycopg.Connection[Any], config: PipelineConfig) -> list[Finding]:
    """With ``source.failover_slot``: the server's version, the slot's failover flag,
    ``synchronized_standby_slots`` on the primary, and the standby's settings to add."""
    source = config.source
    if not source.failover_slot:
        return []
    version = conn.info.server_version
    if version < FAILOVER_MIN_VERSION:
        return [Finding("error", "failover", f"source.failover_slot is set but the server is "
                        f"PostgreSQL {version // 10000}: failover slots need PostgreSQL 17+ "
                        "(the capture refuses to start)", "unset source.failover_slot; after "
                        "a failover the slot is missing on the new primary: cdc capture "
                        f"{RECREATE_FLAG} re-creates it and re-snapshots")]
    findings: list[Finding] = []
    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    if row is not None and row[0]:
        return [Finding("warn", "failover", "this server is a standby; run cdc doctor against "
                        "the primary for the failover checks", standby_settings(source.database))]
    failover = slot_failover(conn, source.slot)
    if failover is None:
        findings.append(Finding("ok", "failover slot", f"{source.slot} does not exist yet; "
                                "the capture creates it with FAILOVER true"))
    elif failover:
        findings.append(Finding("ok", "failover slot", f"{source.slot}: failover=true"))
    else:
        findings.append(Finding("warn", "failover slot", f"{source.slot}: failover=false; the "
                                "capture alters it to FAILOVER true at its next start",
                                f"start the capture, or: ALTER_REPLICATION_SLOT {source.slot} "
                                "(FAILOVER true) on a replication connection"))
    row = conn.execute("SHOW synchronized_standby_slots").fetchone()
    standby_slots = row[0] if row and row[0] else ""
    physical = [r[0] for r in conn.execute(
        "SELECT slot_name FROM pg_replication_slots WHERE slot_type = 'physical'"
        " ORDER BY 1").fetchall()]
    if standby_slots:
        findings.append(Finding("ok", "synchronized_standby_slots", standby_slots))
    else:
        name = physical[0] if physical else "<the standby's physical slot>"
        findings.append(Finding("warn", "synchronized_standby_slots", "is empty: the capture "
                                "may receive changes the standby has not, and the synchronised "
                                "slot may then be unusable after a failover",
                                f"ALTER SYSTEM SET synchronized_standby_slots = '{name}'; "
                                "SELECT pg_reload_conf();"))
    findings.append(Finding("ok", "standby settings", "a failover slot is synchronised only "
                            "to a standby configured for it", standby_settings(source.database)))
    return findings
