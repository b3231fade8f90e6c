"""Operating the capture: doctor, heartbeats advancing an idle slot, PostgreSQL restarts."""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson
import psycopg
from click.testing import CliRunner
from psycopg import sql

from cdc.capture.lsn import parse_lsn
from cdc.capture.runner import Capture
from cdc.cli import main

from .conftest import CaptureEnv


def confirmed_flush(env: CaptureEnv) -> int:
    with psycopg.connect(env.dsn) as conn:
        row = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                           "WHERE slot_name = %s", (env.slot,)).fetchone()
    assert row is not None
    return parse_lsn(row[0])


def test_doctor_reports_identity_problems_with_fixes(capture_env: CaptureEnv) -> None:
    env = capture_env
    env.sql("CREATE TABLE good (id int PRIMARY KEY)", "CREATE TABLE nokey (v text)",
            "CREATE TABLE nothing (id int PRIMARY KEY)",
            "ALTER TABLE nothing REPLICA IDENTITY NOTHING")
    result = CliRunner().invoke(main, ["doctor", "-c", str(env.config_path)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert any(line.startswith("ok    wal_level: logical") for line in lines)
    assert any("replica identity public.nokey: DEFAULT without a primary key" in line
               for line in lines)
    assert any('REPLICA IDENTITY DEFAULT' in line and '"public"."nothing"' in line
               for line in lines)
    assert any(line.startswith("ok    replica identity public.good") for line in lines)
    assert any("slot: " in line and "does not exist yet" in line for line in lines)


def test_idle_published_tables_busy_database_slot_advances(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    env.sql("CREATE TABLE published (id int PRIMARY KEY)")
    with psycopg.connect(env.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE published")
                     .format(sql.Identifier(env.slot)))
    run_capture()
    env.sql("CREATE TABLE other (id serial PRIMARY KEY, pad text)")
    start = confirmed_flush(env)
    with psycopg.connect(env.dsn, autocommit=True) as conn:
        for _ in range(20):  # ~20 MB of WAL on a table nobody captures
            conn.execute("INSERT INTO other (pad) SELECT repeat('w', 1000) "
                         "FROM generate_series(1, 1000)")
        end_of_writes = parse_lsn(conn.execute("SELECT pg_current_wal_lsn()::text")
                                  .fetchone()[0])  # type: ignore[index]
    deadline = time.monotonic() + 60
    while confirmed_flush(env) < end_of_writes:
        assert time.monotonic() < deadline, "the slot did not advance past idle writes"
        time.sleep(0.5)
    assert confirmed_flush(env) - start >= 15 * 1_000_000
    with psycopg.connect(env.dsn) as conn:
        retained = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) "
                                "FROM pg_replication_slots WHERE slot_name = %s",
                                (env.slot,)).fetchone()
    assert retained is not None and retained[0] < 64 * 1024 * 1024


def test_reconnects_after_the_connection_drops(capture_env: CaptureEnv,
                                               run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    env.sql("CREATE TABLE t (id int PRIMARY KEY)")
    capture = run_capture()
    env.sql("INSERT INTO t SELECT generate_series(1, 100)")
    env.wait_for("t", 100)
    with psycopg.connect(env.dsn, autocommit=True) as conn:  # drop the walsender
        conn.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                     "WHERE slot_name = %s", (env.slot,))
    env.sql("INSERT INTO t SELECT generate_series(101, 200)")
    events = env.wait_for("t", 200)
    assert sorted(orjson.loads(m.key)["id"] for m in events) == list(range(1, 201))
    assert capture.stats.sessions >= 2
