"""Capture from a physical standby (logical decoding on a standby, PostgreSQL 16+).

The publication is created on the primary (it replicates); ``source.dsn`` is the
standby, ``source.primary_dsn`` the primary. The slot is created on the standby, the
initial snapshot read there, and the changes made on the primary reach the log exactly
once, in commit order; an incremental snapshot (watermarks written on the primary) works
too. ``cdc doctor`` against the standby checks ``hot_standby_feedback``. Without
``primary_dsn`` the capture still streams, with one warning per feature it goes without.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from compose.launcher import PostgresServer
from compose.launcher.standby import StandbyServer
from tests.integration.fidelity.scenario import replayed

from .failover_tools import CaptureProcess, logged_events, query, wait

pytestmark = pytest.mark.integration

SLOT = "standby_capture"
Change = tuple[str, int, str | None]  # (op, id, note)


def _pipeline(tmp_path: Path, dsn: str, primary_dsn: str | None) -> Path:
    config = tmp_path / "pipeline.yaml"
    primary = f'  primary_dsn: "{primary_dsn}"\n' if primary_dsn else ""
    config.write_text(f"""
source:
  dsn: "{dsn}"
{primary}  slot: {SLOT}
  publication: {SLOT}
  tables: [public.items]
  heartbeat_interval: 1s
log:
  backend: file
  path: {tmp_path / "log"}
  partitions: 1
""")
    return config


def _prepare_primary(primary: PostgresServer) -> None:
    query(primary.dsn(), "CREATE TABLE items (id int PRIMARY KEY, note text)")
    query(primary.dsn(), "INSERT INTO items SELECT i, 'seed' FROM generate_series(1, 20) i")
    query(primary.dsn(), f"CREATE PUBLICATION {SLOT} FOR TABLE items")


def _streaming(primary: PostgresServer) -> None:
    wait("the standby to stream", lambda: bool(query(
        primary.dsn(), "SELECT 1 FROM pg_stat_replication WHERE state = 'streaming'")))


def _slot_active(dsn: str) -> bool:
    """The capture's slot exists on that server and a process streams from it."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
        return conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s AND "
                            "active_pid IS NOT NULL", (SLOT,)).fetchone() is not None


def _table(dsn: str) -> dict[Any, dict[str, Any]]:
    return {int(i): {"id": int(i), "note": note}
            for i, note in query(dsn, "SELECT id, note FROM items")}


def _changes(log_dir: Path) -> list[Change]:
    """The streamed (not snapshot) events: (op, id, note), in log order."""
    return [(e["op"], int(e["key"]["id"]), (e["after"] or {}).get("note"))
            for e in logged_events(log_dir) if e["op"] in ("c", "u", "d")]


def _doctor(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cdc.cli", "doctor", "-c", str(config)],
                          capture_output=True, text=True, timeout=60, check=False)


WORK: list[tuple[list[str], list[Change]]] = [  # transactions on the primary, and the
    # events each must give, in commit order
    (["INSERT INTO items VALUES (21, 'a')"], [("c", 21, "a")]),
    (["UPDATE items SET note = 'b' WHERE id = 21", "DELETE FROM items WHERE id = 3"],
     [("u", 21, "b"), ("d", 3, None)]),
    (["INSERT INTO items SELECT i, 'many' FROM generate_series(22, 24) i"],
     [("c", 22, "many"), ("c", 23, "many"), ("c", 24, "many")]),
    (["UPDATE items SET note = 'c' WHERE id = 1"], [("u", 1, "c")]),
    (["DELETE FROM items WHERE id = 22", "INSERT INTO items VALUES (22, 'again')"],
     [("d", 22, None), ("c", 22, "again")]),
]


@pytest.mark.parametrize("version", [16, 17, 18], ids=lambda v: f"pg{v}")
def test_capture_from_a_standby(tmp_path: Path, version: int) -> None:
    with PostgresServer(version=version) as primary:
        _prepare_primary(primary)
        with StandbyServer(primary, slot="standby1") as standby:
            _streaming(primary)
            config = _pipeline(tmp_path, standby.dsn(), primary.dsn())
            log_dir = tmp_path / "log"
            doctor = _doctor(config)
            assert "ok    hot_standby_feedback: on" in doctor.stdout, doctor.stdout
            assert "ok    primary_dsn" in doctor.stdout, doctor.stdout

            capture = CaptureProcess(config, "standby")
            try:
                wait("the slot on the standby to stream", lambda: _slot_active(standby.dsn()))
                assert not _slot_active(primary.dsn()), "the slot is the standby's"
                wait("the initial snapshot", lambda: replayed(
                    logged_events(log_dir), "id") == _table(primary.dsn()))
                expected: list[Change] = []
                for statements, events in WORK:
                    with psycopg.connect(primary.dsn()) as conn:  # one transaction each
                        for statement in statements:
                            conn.execute(statement.encode())
                    expected += events
                wait("the changes in the log", lambda: len(_changes(log_dir)) >= len(expected))
                assert _changes(log_dir) == expected

                done = subprocess.run([sys.executable, "-m", "cdc.cli", "snapshot", "-c",
                                       str(config), "--table", "public.items"],
                                      capture_output=True, text=True, timeout=60, check=False)
                assert done.returncode == 0, done.stderr
                rows = len(_table(primary.dsn()))
                wait("the incremental snapshot (watermarks on the primary)", lambda: sum(
                    e["op"] == "r" for e in logged_events(log_dir)) >= 20 + rows, timeout=120)
                assert replayed(logged_events(log_dir), "id") == _table(primary.dsn())
                assert _changes(log_dir) == expected, "exactly once"
                assert capture.proc.poll() is None, capture.stderr[-4000:]
            finally:
                err = capture.stop()
                print(err[-6000:])  # shown when the test fails
            assert "Traceback" not in err and "heartbeats are off" not in err, err[-4000:]

            query(standby.dsn(), "ALTER SYSTEM SET hot_standby_feedback = off")
            query(standby.dsn(), "SELECT pg_reload_conf()")
            wait("the setting to apply", lambda: query(
                standby.dsn(), "SHOW hot_standby_feedback")[0][0] == "off")
            doctor = _doctor(config)
            assert doctor.returncode == 1, doctor.stdout
            assert "error hot_standby_feedback: is off" in doctor.stdout, doctor.stdout
            assert "hot_standby_feedback = on" in doctor.stdout, doctor.stdout


def test_standby_without_primary_dsn_streams_with_one_warning_each(tmp_path: Path) -> None:
    with PostgresServer(version=16) as primary:
        _prepare_primary(primary)
        with StandbyServer(primary, slot="standby1") as standby:
            _streaming(primary)
            config = _pipeline(tmp_path, standby.dsn(), None)
            log_dir = tmp_path / "log"
            doctor = _doctor(config)
            assert "warn  primary_dsn: not set" in doctor.stdout, doctor.stdout
            capture = CaptureProcess(config, "standby")
            try:
                def slot_created() -> bool:  # what an operator does (README): nudge
                    query(primary.dsn(), "SELECT pg_log_standby_snapshot()")
                    return _slot_active(standby.dsn())
                wait("the slot on the standby to stream", slot_created)
                query(primary.dsn(), "INSERT INTO items VALUES (100, 'x')")
                query(primary.dsn(), "DELETE FROM items WHERE id = 2")
                wait("the changes in the log", lambda: len(_changes(log_dir)) >= 2)
                assert _changes(log_dir) == [("c", 100, "x"), ("d", 2, None)]
                assert replayed(logged_events(log_dir), "id") == _table(primary.dsn())
                # a negative check: heartbeat intervals pass; they are off, nothing fails
                time.sleep(3)
                assert capture.proc.poll() is None, capture.stderr[-4000:]
            finally:
                err = capture.stop()
                print(err[-6000:])  # shown when the test fails
            for warning in ("heartbeats are off", "incremental snapshots are off",
                            f"publication {SLOT} is not created"):
                assert err.count(warning) == 1, (warning, err[-4000:])
            assert "Traceback" not in err and "cannot make new WAL" not in err, err[-4000:]


def test_standby_before_16_is_refused(tmp_path: Path) -> None:
    with PostgresServer(version=15) as primary:
        _prepare_primary(primary)
        with StandbyServer(primary, slot="standby1") as standby:
            _streaming(primary)
            config = _pipeline(tmp_path, standby.dsn(), primary.dsn())
            doctor = _doctor(config)
            assert doctor.returncode == 1, doctor.stdout
            assert "error standby: source.dsn is a standby running PostgreSQL 15" in \
                doctor.stdout, doctor.stdout
            capture = CaptureProcess(config, "refused")
            code = capture.exit_code(timeout=60)
            err = capture.stop()
            assert code != 0 and "needs PostgreSQL 16 or later" in err, err[-4000:]
            assert "Traceback" not in err and "retrying" not in err, err[-4000:]
