"""The publication and the replication slot: created when missing, checked at start."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from cdc.errors import SlotInUseError, SourceError

from ..lsn import parse_lsn
from ..stream.replication import ReplicationConnection
from .publication import ensure_publication
from .slot_state import SlotState
from .wal_safety import SlotLostError, wal_retention

log = logging.getLogger(__name__)

__all__ = ["FAILOVER_MIN_VERSION", "SlotState", "alter_failover_query", "check_slot_health",
           "create_slot_query", "drop_lost_slot", "ensure_publication", "ensure_slot",
           "primary_key", "read_slot", "require_failover_support", "slot_failover",
           "slot_two_phase", "split_table"]

FAILOVER_MIN_VERSION = 170000  # failover slots, ALTER_REPLICATION_SLOT: PostgreSQL 17


def split_table(name: str) -> tuple[str, str]:
    """``'public.orders'`` → ``('public', 'orders')``."""
    schema, _, table = name.partition(".")
    return (schema, table) if table else ("public", schema)


def read_slot(conn: psycopg.Connection[Any], slot: str) -> SlotState | None:
    """The slot's state, or None when it does not exist."""
    row = conn.execute(  # a standby has no current WAL position: its replay position
        "SELECT slot_name, plugin, database, active, active_pid, confirmed_flush_lsn::text,"
        " wal_status, pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery()"
        " THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END, restart_lsn)::bigint,"
        " safe_wal_size FROM pg_replication_slots WHERE slot_name = %s", (slot,)).fetchone()
    if row is None:
        return None
    return SlotState(row[0], row[1], row[2], bool(row[3]), row[4],
                     parse_lsn(row[5]) if row[5] else None, row[6],
                     int(row[7]) if row[7] is not None else None,
                     int(row[8]) if row[8] is not None else None)


def require_failover_support(server_version: int, failover: bool) -> None:
    """Refuse ``source.failover_slot`` on a server without failover slots (before 17)."""
    if failover and server_version < FAILOVER_MIN_VERSION:
        raise SourceError(
            f"source.failover_slot is set but the server is PostgreSQL "
            f"{server_version // 10000}: failover slots (synchronised to a standby) need "
            f"PostgreSQL 17 or later; unset source.failover_slot, and see the README's "
            f"'PostgreSQL versions and high availability' for what a failover does then")


def create_slot_query(slot: str, *, export_snapshot: bool, two_phase: bool,
                      failover: bool) -> sql.Composed:
    """``CREATE_REPLICATION_SLOT … LOGICAL pgoutput (SNAPSHOT …, [TWO_PHASE true,]
    FAILOVER true)``: the option-list form (PostgreSQL 15+; FAILOVER needs 17)."""
    options: list[sql.Composable] = [sql.SQL("SNAPSHOT {}").format(
        sql.Literal("export" if export_snapshot else "nothing"))]
    if two_phase:
        options.append(sql.SQL("TWO_PHASE true"))
    if failover:
        options.append(sql.SQL("FAILOVER true"))
    return sql.SQL("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput ({})").format(
        sql.Identifier(slot), sql.SQL(", ").join(options))


def alter_failover_query(slot: str) -> sql.Composed:
    """``ALTER_REPLICATION_SLOT name (FAILOVER true)`` (replication protocol, 17+)."""
    return sql.SQL("ALTER_REPLICATION_SLOT {} (FAILOVER true)").format(sql.Identifier(slot))


def ensure_slot(conn: psycopg.Connection[Any], dsn: str, slot: str,
                on_created: Callable[[int, str], None] | None = None,
                two_phase: bool = False, failover: bool = False) -> SlotState:
    """Create the pgoutput slot if missing; refuse a slot that cannot be used.

    With ``on_created``, a new slot exports a snapshot and ``on_created(consistent_point,
    snapshot_name)`` runs while that snapshot is valid (the initial snapshot). ``two_phase``:
    a new slot decodes prepared transactions at PREPARE (PostgreSQL 15+); an existing
    slot keeps what it was created with (``slot_two_phase``). ``failover``
    (``source.failover_slot``, PostgreSQL 17+, refused before): a new slot is created as a
    failover slot, an existing one without the flag is altered to have it.
    """
    require_failover_support(conn.info.server_version, failover)
    state = read_slot(conn, slot)
    created = state is None
    if state is None:
        with ReplicationConnection(dsn) as repl:
            wants_two_phase = two_phase and repl.server_version >= 150000
            if failover:
                (_, lsn, snapshot, _), = repl.command(create_slot_query(
                    slot, export_snapshot=on_created is not None, two_phase=wants_two_phase,
                    failover=True))
                point = parse_lsn(lsn or "0/0")
            else:
                point, snapshot = repl.create_slot(
                    slot, export_snapshot=on_created is not None, two_phase=two_phase)
            log.info("created replication slot %s", slot,
                     extra={"slot": slot, "two_phase": wants_two_phase, "failover": failover})
            if on_created is not None and snapshot is not None:
                on_created(point, snapshot)
        state = read_slot(conn, slot)
        assert state is not None
    dbname = conn.info.dbname
    if state.plugin != "pgoutput":
        raise SourceError(f"slot {slot!r} uses plugin {state.plugin!r}, not pgoutput; drop it "
                          f"(SELECT pg_drop_replication_slot('{slot}')) or configure another")
    if state.database != dbname:
        raise SourceError(f"slot {slot!r} belongs to database {state.database!r}, not "
                          f"{dbname!r}; configure another slot name")
    if state.wal_status == "lost":
        raise SlotLostError(slot)
    if state.active and state.active_pid is not None:
        raise SlotInUseError(f"slot {slot!r} is in use by another process (pid "
                          f"{state.active_pid}); only one capture may read a slot")
    if failover and not created and slot_failover(conn, slot) is False:
        with ReplicationConnection(dsn) as repl:
            repl.command(alter_failover_query(slot))
        log.warning("replication slot %s was not a failover slot: altered to FAILOVER true "
                    "(source.failover_slot), so it is synchronised to standbys with "
                    "sync_replication_slots = on", slot, extra={"slot": slot})
    return state


def slot_failover(conn: psycopg.Connection[Any], slot: str) -> bool | None:
    """``pg_replication_slots.failover`` (PostgreSQL 17+); None before 17 or when the slot
    does not exist."""
    if conn.info.server_version < FAILOVER_MIN_VERSION:
        return None
    row = conn.execute("SELECT failover FROM pg_replication_slots WHERE slot_name = %s",
                       (slot,)).fetchone()
    return None if row is None else bool(row[0])


def slot_two_phase(conn: psycopg.Connection[Any], slot: str) -> bool:
    """True when ``slot`` decodes prepared transactions at PREPARE: PostgreSQL 15+
    (pgoutput's two-phase support) and ``pg_replication_slots.two_phase``. Such a slot does
    so whatever the client asks, so the capture must stream it with ``two_phase 'on'``."""
    if conn.info.server_version < 150000:
        return False
    row = conn.execute("SELECT two_phase FROM pg_replication_slots WHERE slot_name = %s",
                       (slot,)).fetchone()
    return row is not None and bool(row[0])


def drop_lost_slot(conn: psycopg.Connection[Any], slot: str) -> bool:
    """Drop ``slot`` if it is lost (``--recreate-lost-slot``); True when it was dropped."""
    state = read_slot(conn, slot)
    if state is None or state.wal_status != "lost":
        return False
    conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    log.warning("dropped lost replication slot %s: a new slot is created and the tables "
                "are snapshotted again", slot, extra={"slot": slot})
    return True


def check_slot_health(conn: psycopg.Connection[Any], slot: str) -> None:
    """While streaming: raise ``SlotLostError`` if the slot was invalidated, log a warning
    when it holds back WAL close to ``max_slot_wal_keep_size``."""
    state = read_slot(conn, slot)
    if state is None:
        raise SourceError(f"replication slot {slot!r} disappeared while streaming")
    retention = wal_retention(conn, state)
    if retention.level == "error":
        raise SlotLostError(slot)
    if retention.level == "warn":
        log.warning("replication slot %s is close to losing WAL: %s", slot,
                    retention.describe(), extra={"slot": slot})


def primary_key(conn: psycopg.Connection[Any], relation_oid: int) -> list[str]:
    """The primary-key column names of a table, in key order (empty if none)."""
    rows = conn.execute(
        "SELECT a.attname FROM pg_index i"
        " JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) ON true"
        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
        " WHERE i.indrelid = %s AND i.indisprimary ORDER BY k.n", (relation_oid,)).fetchall()
    return [r[0] for r in rows]
