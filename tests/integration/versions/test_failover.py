"""A real failover on PostgreSQL 17 with a failover slot (``source.failover_slot``): a
primary and a physical streaming standby with ``sync_replication_slots``; the capture
streams under a steady workload through a multi-host DSN; the primary is killed
(``pg_ctl stop -m immediate``), the standby promoted; the capture goes on from the
synchronised slot on the new primary. The log then holds every row the new primary has,
exactly once, in commit order."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from compose.launcher import PostgresServer
from compose.launcher.standby import StandbyServer

from .failover_tools import Workload, logged_events, query, wait

pytestmark = pytest.mark.integration

SLOT = "failover_capture"


def _slot_is(dsn: str, condition: str) -> bool:
    """The capture's slot exists on that server and meets ``condition`` (SQL)."""
    statement = sql.SQL("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s AND {}"
                        ).format(sql.SQL(condition))
    with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
        return conn.execute(statement, (SLOT,)).fetchone() is not None


def _logged_ids(log_dir: Path) -> list[int]:
    """The ``items`` ids inserted, in log order (one partition: commit order)."""
    return [int(e["after"]["id"]) for e in logged_events(log_dir) if e.get("op") == "c"]


def test_capture_goes_on_from_the_promoted_standby(tmp_path: Path) -> None:
    with PostgresServer(version=17) as primary:
        query(primary.dsn(), "CREATE TABLE items (id int PRIMARY KEY, note text)")
        with StandbyServer(primary, slot="standby1") as standby:
            query(primary.dsn(), "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'")
            query(primary.dsn(), "SELECT pg_reload_conf()")
            wait("the standby to stream", lambda: bool(query(
                primary.dsn(), "SELECT 1 FROM pg_stat_replication WHERE state = 'streaming'")))
            multi = (f"host=127.0.0.1,127.0.0.1 port={primary.port},{standby.port} "
                     "user=postgres dbname=postgres target_session_attrs=read-write")
            log_dir = tmp_path / "log"
            config = tmp_path / "pipeline.yaml"
            config.write_text(f"""
source:
  dsn: "{multi}"
  slot: {SLOT}
  publication: {SLOT}
  heartbeat_interval: 1s
  failover_slot: true
log:
  backend: file
  path: {log_dir}
  partitions: 1
""")
            stderr = (tmp_path / "capture.stderr").open("wb")
            capture = subprocess.Popen([sys.executable, "-m", "cdc.cli", "capture", "-c",
                                        str(config)], stdout=subprocess.DEVNULL, stderr=stderr)
            workload = Workload(multi)
            try:
                wait("the capture to stream", lambda: _slot_is(
                    primary.dsn(), "active_pid IS NOT NULL AND failover"))
                workload.start()
                wait("the slot to be synchronised to the standby", lambda: _slot_is(
                    standby.dsn(), "synced AND NOT temporary"))
                wait("changes in the log", lambda: len(_logged_ids(log_dir)) > 100)
                before = workload.next_id
                primary.crash()
                standby.promote()
                wait("the workload on the new primary",
                      lambda: workload.next_id > before + 200)
                wait("the capture on the new primary", lambda: _slot_is(
                    standby.dsn(), "active_pid IS NOT NULL"), timeout=120)
                workload.stopping.set()
                workload.join(timeout=30)
                expected = [int(r[0]) for r in query(
                    standby.dsn(), "SELECT id FROM items ORDER BY id")]
                wait("every row of the new primary in the log",
                      lambda: set(expected) <= set(_logged_ids(log_dir)), timeout=120)
                time.sleep(1.5)  # a duplicate would have arrived by now
                logged = _logged_ids(log_dir)
                assert logged == expected, (len(logged), len(expected))
                assert expected[-1] > before  # the test did cross the failover
                assert capture.poll() is None, "the capture stopped"
                print(f"{len(logged)} rows, {before} before the failover")
            finally:
                workload.stopping.set()
                capture.terminate()
                try:
                    capture.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    capture.kill()
                    capture.wait()
                stderr.close()
                print((tmp_path / "capture.stderr").read_text(errors="replace")[-6000:])
