"""Capturing from a physical standby (logical decoding on a standby, PostgreSQL 16+).

A standby decodes the WAL it replays, so its slot sees exactly the primary's commits, in
order. It cannot write WAL, so what the capture writes must go to the primary
(``source.primary_dsn``): heartbeats, the watermarks (and chunk reads) of incremental
snapshots, the publication (created or extended there; it reaches the standby by
replication). Without ``primary_dsn`` each of these is off, with one warning at start.
Creating a slot on a standby waits for a running-transactions record from the primary;
with ``primary_dsn`` the capture asks for one (``pg_log_standby_snapshot()``) every
second while it prepares the slot, otherwise the primary writes one every 15 s when busy.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cdc.config.source import SourceConfig
from cdc.errors import SourceError, TerminalError

from ..lsn import format_lsn, parse_lsn
from . import session
from .publication import ensure_publication

log = logging.getLogger(__name__)

__all__ = ["STANDBY_MIN_VERSION", "SourceRole", "StandbyTooOldError", "nudge_primary",
           "prepare_publication", "require_publication", "source_role", "wait_for_replay"]

STANDBY_MIN_VERSION = 160000  # logical decoding on a standby: PostgreSQL 16
NUDGE_INTERVAL_S = 1.0
REPLAY_TIMEOUT_S = 15.0
_WARNED: set[str] = set()  # features reported off, once per process


class StandbyTooOldError(TerminalError):
    """``source.dsn`` is a standby before PostgreSQL 16: no logical decoding there."""


@dataclass(frozen=True, slots=True)
class SourceRole:
    """What the source server is, and where the capture's writes go."""

    standby: bool
    write_dsn: str | None  # the source itself on a primary; primary_dsn (or None) on a standby


def source_role(conn: psycopg.Connection[Any], source: SourceConfig) -> SourceRole:
    """Primary or standby (``pg_is_in_recovery()``); refuses a standby before 16, and
    warns once per feature a standby without ``source.primary_dsn`` goes without."""
    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    if row is None or not row[0]:
        return SourceRole(False, source.conninfo())
    version = conn.info.server_version
    if version < STANDBY_MIN_VERSION:
        raise StandbyTooOldError(
            f"source.dsn is a standby running PostgreSQL {version // 10000}: logical "
            "decoding on a standby needs PostgreSQL 16 or later; point source.dsn at the "
            "primary")
    primary = source.primary_conninfo()
    if primary is None:
        _warn_once("heartbeats", "heartbeats are off: source.dsn is a standby, which cannot "
                   "write WAL (pg_logical_emit_message); set source.primary_dsn so they are "
                   "written on the primary, or an idle publication holds WAL back")
        _warn_once("incremental", "incremental snapshots are off (cdc snapshot, tables that "
                   "join the publication, an interrupted initial snapshot's remaining "
                   "tables wait): their watermarks are written to the WAL, which a standby "
                   "cannot; set source.primary_dsn")
        _warn_once("publication", f"publication {source.publication} is not created or "
                   "extended: a standby cannot; create it on the primary (it replicates), or "
                   "set source.primary_dsn")
    return SourceRole(True, primary)


def _warn_once(feature: str, message: str) -> None:
    if feature not in _WARNED:
        _WARNED.add(feature)
        log.warning(message)


def require_publication(conn: psycopg.Connection[Any], publication: str) -> None:
    """On a standby without ``primary_dsn``: the publication must exist (replicated)."""
    row = conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s",
                       (publication,)).fetchone()
    if row is None:
        raise SourceError(f"publication {publication!r} does not exist on this standby: "
                          "create it on the primary (CREATE PUBLICATION … FOR ALL TABLES, "
                          "or FOR TABLE …), or set source.primary_dsn so the capture does")


def prepare_publication(conn: psycopg.Connection[Any], role: SourceRole,
                        source: SourceConfig) -> None:
    """Create or extend the publication where it can be written: the source, or on a
    standby the primary (then, if that wrote WAL, wait a while for the standby to replay
    it); a standby without ``primary_dsn`` only checks that it exists."""
    if not role.standby:
        ensure_publication(conn, source.publication, source.tables)
    elif role.write_dsn is None:
        require_publication(conn, source.publication)
    else:
        with session.connect(role.write_dsn) as primary:
            before = _lsn(primary, "pg_current_wal_insert_lsn")
            ensure_publication(primary, source.publication, source.tables)
            if _lsn(primary, "pg_current_wal_insert_lsn") != before:
                wait_for_replay(_lsn(primary, "pg_current_wal_flush_lsn"), conn)


def _lsn(conn: psycopg.Connection[Any], function: str) -> int:
    query = sql.SQL("SELECT {}()::text").format(sql.Identifier(function))
    row = conn.execute(query).fetchone()
    assert row is not None
    return parse_lsn(row[0])


def wait_for_replay(target: int, standby: psycopg.Connection[Any],
                    timeout: float = REPLAY_TIMEOUT_S) -> bool:
    """Wait until the standby has replayed the primary's WAL up to ``target`` (where the
    publication just created or extended there is); False, with a warning, when it has
    not within ``timeout`` (the capture goes on: a publication the standby does not have
    yet fails decoding, and the capture retries)."""
    deadline = time.monotonic() + timeout
    while True:
        row = standby.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()
        replayed = row[0] if row is not None else None
        if replayed is not None and parse_lsn(replayed) >= target:
            return True
        if time.monotonic() > deadline:
            log.warning("the standby has not replayed the primary's WAL up to %s (where the "
                        "publication was changed) within %.0f s: it is at %s; going on",
                        format_lsn(target), timeout, replayed)
            return False
        time.sleep(0.1)


@contextmanager
def nudge_primary(role: SourceRole) -> Iterator[None]:
    """While the body runs (a slot being created on a standby): ask the primary for a
    running-transactions record every second, so the slot's creation need not wait for
    the next one. Does nothing on a primary, or without ``primary_dsn``."""
    if not role.standby or role.write_dsn is None:
        yield
        return
    done = threading.Event()
    thread = threading.Thread(target=_nudge, args=(role.write_dsn, done),
                              name="standby-snapshot", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5)


def _nudge(dsn: str, done: threading.Event) -> None:
    try:
        with session.connect(dsn) as conn:
            while not done.is_set():
                conn.execute("SELECT pg_log_standby_snapshot()")
                done.wait(NUDGE_INTERVAL_S)
    except psycopg.Error as exc:
        log.warning("cannot ask the primary for a running-transactions record: %s; "
                    "creating the slot on the standby waits for the primary's next one "
                    "(pg_log_standby_snapshot() is a superuser's unless granted: GRANT "
                    "EXECUTE ON FUNCTION pg_log_standby_snapshot() TO <role>)",
                    str(exc).strip())
