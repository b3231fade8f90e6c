"""WAL safety against a real PostgreSQL with a tiny ``max_slot_wal_keep_size``.

The server runs with 1 MiB WAL segments, so a few ``pg_switch_wal()`` calls push a slot
past its limit; the next checkpoint invalidates it (``wal_status = 'lost'``). ``cdc doctor``
reports the retained WAL against the limit (ok → warn → error), ``cdc capture`` refuses a
lost slot naming it and the recovery, and ``cdc capture --recreate-lost-slot`` drops the
slot, snapshots the tables again (the changes made while the slot was lost are in the new
snapshot) and streams on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from compose.launcher import PostgresServer

from .conftest import CaptureEnv

LIMIT_MB = 8
SLOT = "walsafe"


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    settings = {"max_slot_wal_keep_size": f"'{LIMIT_MB}MB'", "min_wal_size": "'2MB'",
                "max_wal_size": "'4MB'", "checkpoint_timeout": "'1h'"}
    with PostgresServer(wal_segment_mb=1, settings=settings) as pg:
        yield pg


@pytest.fixture
def env(server: PostgresServer, tmp_path: Path) -> Iterator[CaptureEnv]:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {SLOT} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {SLOT}")
    dsn = server.dsn(SLOT)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("CREATE TABLE filler (id serial PRIMARY KEY, pad text)")
        conn.execute("INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 50) i")
    config = tmp_path / "pipeline.yaml"
    config.write_text(f"source:\n  dsn: {dsn}\n  slot: {SLOT}\n  publication: {SLOT}\n"
                      f"  tables: [public.t]\n"
                      f"log:\n  backend: file\n  path: {tmp_path / 'log'}\n  partitions: 2\n")
    yield CaptureEnv(dsn, config, tmp_path / "log", SLOT)
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                     "WHERE slot_name = %s AND NOT active", (SLOT,))


def cdc(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cdc.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def start_capture(env: CaptureEnv, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "cdc.cli", "capture", "-c",
                             str(env.config_path), *flags], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM (and SIGCONT, if it was stopped); its stderr."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
    _, err = proc.communicate(timeout=60)
    return err


def slot_row(env: CaptureEnv) -> tuple[str | None, int | None]:
    """(wal_status, bytes retained) of the test's slot."""
    with psycopg.connect(env.dsn) as conn:
        row = conn.execute("SELECT wal_status, pg_wal_lsn_diff(pg_current_wal_lsn(), "
                           "restart_lsn)::bigint FROM pg_replication_slots "
                           "WHERE slot_name = %s", (SLOT,)).fetchone()
    assert row is not None, "the slot exists"
    return row[0], row[1]


def generate_wal(env: CaptureEnv, segments: int) -> None:
    """Write about ``segments`` MiB of WAL (one filler row, then a segment switch, each)."""
    with psycopg.connect(env.dsn, autocommit=True) as conn:
        for _ in range(segments):
            conn.execute("INSERT INTO filler (pad) VALUES ('x')")
            conn.execute("SELECT pg_switch_wal()")


def lose_slot(env: CaptureEnv) -> None:
    """Write WAL past the limit and checkpoint until the slot is invalidated."""
    deadline = time.monotonic() + 60
    while slot_row(env)[0] != "lost":
        assert time.monotonic() < deadline, f"the slot is not lost: {slot_row(env)}"
        generate_wal(env, 4)
        with psycopg.connect(env.dsn, autocommit=True) as conn:
            conn.execute("CHECKPOINT")


def wait_for_ops(env: CaptureEnv, wanted: dict[int, str], timeout: float = 60) -> None:
    """Wait until the last event of each id in ``wanted`` has that op."""
    deadline = time.monotonic() + timeout
    while True:
        last = {e["key"]["id"]: e["op"] for e in env.values("t") if e["op"] != "t"}
        if all(last.get(key) == op for key, op in wanted.items()):
            return
        assert time.monotonic() < deadline, f"last ops {last}, wanted {wanted}"
        time.sleep(0.2)


def doctor_slot_line(env: CaptureEnv) -> tuple[int, str]:
    done = cdc("doctor", "-c", str(env.config_path))
    lines = [line for line in done.stdout.splitlines() if " slot: " in line]
    assert len(lines) == 1, done.stdout + done.stderr
    index = done.stdout.splitlines().index(lines[0])
    return done.returncode, "\n".join(done.stdout.splitlines()[index:index + 2])


def test_lost_slot_is_refused_reported_and_recovered(env: CaptureEnv) -> None:
    capture = start_capture(env)
    try:
        wait_for_ops(env, {1: "r", 50: "r"})
    finally:
        stop(capture)

    code, line = doctor_slot_line(env)
    assert code == 0 and line.startswith("ok    slot: walsafe"), line
    assert f"of max_slot_wal_keep_size={LIMIT_MB * 1024 * 1024} bytes" in line, line

    # the capture is stopped: the slot holds WAL back, up to ~80 % of the limit
    while (slot_row(env)[1] or 0) < 0.82 * LIMIT_MB * 1024 * 1024:
        generate_wal(env, 1)
    code, line = doctor_slot_line(env)
    assert code == 0 and line.startswith("warn  slot: walsafe"), line
    assert "close to max_slot_wal_keep_size" in line and "% of max_slot_wal_keep_size" in line

    # changes made while the slot is being lost: only a new snapshot can bring them
    with psycopg.connect(env.dsn, autocommit=True) as conn:
        conn.execute("UPDATE t SET v = 'changed' WHERE id = 1")
        conn.execute("DELETE FROM t WHERE id = 2")
        conn.execute("INSERT INTO t VALUES (101, 'new')")
    lose_slot(env)

    code, line = doctor_slot_line(env)
    assert code == 1 and line.startswith("error slot: walsafe"), line
    assert "wal_status=lost" in line and "--recreate-lost-slot" in line

    refused = start_capture(env)
    _, err = refused.communicate(timeout=60)
    assert refused.returncode != 0, "the capture must stop on a lost slot, not retry forever"
    assert "replication slot 'walsafe' is lost" in err, err
    assert "--recreate-lost-slot" in err and "Traceback" not in err, err

    recovering = start_capture(env, "--recreate-lost-slot")
    try:
        wait_for_ops(env, {101: "r", 1: "r"})
        snapshot = [e for e in env.values("t") if e["op"] == "r"]
        second = [e for e in snapshot if e["after"]["id"] == 1][-1]
        assert second["after"]["v"] == "changed", "the new snapshot holds the missed update"
        ops = [(e["op"], e["key"].get("id")) for e in env.values("t")]
        truncated = ops.index(("t", None))  # before the new slot's snapshot: the missed
        assert ("r", 2) not in ops[truncated:], "delete of id 2 leaves no ghost row"
        with psycopg.connect(env.dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO t VALUES (102, 'streamed')")
        wait_for_ops(env, {102: "c"})
    finally:
        err = stop(recovering)
    assert "dropped lost replication slot walsafe" in err, err
    assert slot_row(env)[0] in ("reserved", "extended")
    code, line = doctor_slot_line(env)
    assert code == 0 and line.startswith("ok    slot: walsafe"), line


def test_slot_lost_while_streaming_stops_the_capture(env: CaptureEnv) -> None:
    capture = start_capture(env)
    try:
        wait_for_ops(env, {50: "r"})
        os.kill(capture.pid, signal.SIGSTOP)  # a stalled capture: the slot stops advancing
        lose_slot(env)  # the checkpointer ends the walsender, then invalidates the slot
        os.kill(capture.pid, signal.SIGCONT)
        _, err = capture.communicate(timeout=60)
    finally:
        if capture.poll() is None:
            stop(capture)
    assert capture.returncode != 0, err
    assert "replication slot 'walsafe' is lost" in err and "--recreate-lost-slot" in err, err
