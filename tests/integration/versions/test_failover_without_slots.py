"""A failover without failover slots (PostgreSQL 15), and a slot dropped by hand.

The slot lives on the primary only, so after the standby is promoted the capture finds
no slot there: it stops with an error naming the slot, the position since which changes
may be missing, and ``--recreate-lost-slot`` (exit status not 0, no traceback). Run
with the flag, it creates a new slot and snapshots again, each table's rows preceded by
a truncate event: the log then materialises to exactly the new primary's table — rows
the old primary committed that never reached the standby, and rows deleted on the new
primary before the re-snapshot, do not survive.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from cdc.capture.lsn import parse_lsn
from cdc.capture.source import session
from cdc.capture.source.wal_safety import advance_wal_past
from compose.launcher import PostgresServer
from compose.launcher.standby import StandbyServer
from tests.integration.fidelity.scenario import replayed

from .failover_tools import CaptureProcess, Workload, logged_events, query, wait

pytestmark = pytest.mark.integration

SLOT = "nofailover_capture"
MISSING = f"replication slot {SLOT!r} is missing"


def _pipeline(tmp_path: Path, dsn: str) -> Path:
    config = tmp_path / "pipeline.yaml"
    config.write_text(f"""
source:
  dsn: "{dsn}"
  slot: {SLOT}
  publication: {SLOT}
  heartbeat_interval: 1s
log:
  backend: file
  path: {tmp_path / "log"}
  partitions: 1
""")
    return config


def _slot_active(dsn: str) -> bool:
    return bool(_query_params(dsn, "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s "
                             "AND active_pid IS NOT NULL", SLOT))


def _query_params(dsn: str, text: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
        return conn.execute(text.encode(), params).fetchall()


def _table(dsn: str) -> dict[Any, dict[str, Any]]:
    return {int(i): {"id": int(i), "note": note}
            for i, note in query(dsn, "SELECT id, note FROM items")}


def _log_state(log_dir: Path) -> dict[Any, dict[str, Any]]:
    return replayed(logged_events(log_dir), "id")


def _converges(capture: CaptureProcess, log_dir: Path, dsn: str) -> None:
    """The log's state per key becomes the table's, with the capture still running."""
    def equal() -> bool:
        assert capture.proc.poll() is None, capture.stderr[-4000:]
        return _log_state(log_dir) == _table(dsn)
    wait("the log to materialise to the table", equal, timeout=120)


def _refused(capture: CaptureProcess, timeout: float) -> str:
    code = capture.exit_code(timeout)
    err = capture.stop()
    assert code != 0, "the capture must stop on a missing slot, not retry or re-snapshot"
    assert MISSING in err and "--recreate-lost-slot" in err, err[-4000:]
    assert "may be missing" in err and "Traceback" not in err, err[-4000:]
    return err


def test_failover_without_failover_slots_stops_then_recovers(tmp_path: Path) -> None:
    with PostgresServer(version=15) as primary:
        query(primary.dsn(), "CREATE TABLE items (id int PRIMARY KEY, note text)")
        query(primary.dsn(), "INSERT INTO items SELECT i, 'seed' FROM generate_series(-50, 0) i")
        with StandbyServer(primary, slot="standby1") as standby:
            wait("the standby to stream", lambda: bool(query(
                primary.dsn(), "SELECT 1 FROM pg_stat_replication WHERE state = 'streaming'")))
            multi = (f"host=127.0.0.1,127.0.0.1 port={primary.port},{standby.port} "
                     "user=postgres dbname=postgres target_session_attrs=read-write")
            config = _pipeline(tmp_path, multi)
            log_dir = tmp_path / "log"
            capture = CaptureProcess(config, "streaming")
            workload = Workload(multi)
            try:
                wait("the capture to stream", lambda: _slot_active(primary.dsn()))
                workload.start()
                wait("changes in the log", lambda: len(logged_events(log_dir)) > 150)
                query(primary.dsn(), "UPDATE items SET note = 'old primary' WHERE id < -40")
                primary.crash()
                standby.promote()
                assert not _query_params(standby.dsn(), "SELECT 1 FROM pg_replication_slots "
                                        "WHERE slot_name = %s", SLOT), "no slot on 15"
                before = workload.next_id
                wait("the workload on the new primary", lambda: workload.next_id > before + 50)
                err = _refused(capture, timeout=120)
                assert "failover" in err, err[-4000:]
            finally:
                workload.stopping.set()
                capture.stop()
            workload.finish()
            # while no slot records changes: rows deleted and updated on the new primary
            query(standby.dsn(), "DELETE FROM items WHERE id % 7 = 0")
            query(standby.dsn(), "UPDATE items SET note = 'after failover' WHERE id % 5 = 0")

            recovering = CaptureProcess(config, "recovering", "--recreate-lost-slot")
            try:
                _converges(recovering, log_dir, standby.dsn())
                query(standby.dsn(), "INSERT INTO items VALUES (1000000, 'streamed')")
                query(standby.dsn(), "DELETE FROM items WHERE id = 1")
                _converges(recovering, log_dir, standby.dsn())
            finally:
                err = recovering.stop()
            assert f"slot {SLOT} is missing" in err and "snapshotted again" in err, err[-4000:]
            ops = [e["op"] for e in logged_events(log_dir)]
            assert "t" in ops and ops.index("t") > ops.index("c"), "truncate before re-read"
            assert len(_table(standby.dsn())) > 100


def test_slot_dropped_by_hand_stops_the_capture(tmp_path: Path) -> None:
    with PostgresServer() as server:
        dsn = server.dsn()
        query(dsn, "CREATE TABLE items (id int PRIMARY KEY, note text)")
        query(dsn, "INSERT INTO items SELECT i, 'seed' FROM generate_series(1, 100) i")
        config = _pipeline(tmp_path, dsn)
        log_dir = tmp_path / "log"
        first = CaptureProcess(config, "first")  # a new pipeline: it creates its slot
        try:
            _converges(first, log_dir, dsn)
            query(dsn, "UPDATE items SET note = 'streamed' WHERE id <= 10")
            _converges(first, log_dir, dsn)
        finally:
            first.stop()
        _query_params(dsn, "SELECT pg_drop_replication_slot(%s)", SLOT)
        query(dsn, "DELETE FROM items WHERE id > 90")
        query(dsn, "UPDATE items SET note = 'unseen' WHERE id <= 5")

        err = _refused(CaptureProcess(config, "refused"), timeout=60)
        assert "since position 0/" in err, err[-4000:]
        assert not _query_params(dsn, "SELECT 1 FROM pg_replication_slots WHERE slot_name = "
                                "%s", SLOT), "refusing creates no slot"

        recovering = CaptureProcess(config, "recovering", "--recreate-lost-slot")
        try:
            _converges(recovering, log_dir, dsn)
        finally:
            recovering.stop()
        again = CaptureProcess(config, "again")  # the slot exists now: streams on
        try:
            wait("the capture to stream", lambda: _slot_active(dsn))
            query(dsn, "INSERT INTO items VALUES (500, 'new')")
            _converges(again, log_dir, dsn)
        finally:
            err = again.stop()
        assert MISSING not in err, err[-4000:]


def test_wal_is_advanced_past_the_logs_last_position() -> None:
    """A promoted standby behind the log: its WAL is moved past the log's last position
    before a new slot is created there (so the new positions are above the log's)."""
    with PostgresServer(wal_segment_mb=1) as server, session.connect(server.dsn()) as conn:
        def insert_lsn() -> int:
            row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
            assert row is not None
            return parse_lsn(row[0])
        ahead = insert_lsn() + 3 * 1024 * 1024  # three segments past the server
        advance_wal_past(conn, ahead)
        assert insert_lsn() > ahead
        before = insert_lsn()
        advance_wal_past(conn, before - 1)  # already past: nothing written
        assert insert_lsn() == before
