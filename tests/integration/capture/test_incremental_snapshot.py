"""Incremental snapshots (watermark method) while a writer keeps changing the table.

The capture starts with ``snapshot: never``, so rows written before the slot existed
reach the log only through the incremental snapshot: replaying the log (newest event per
key by source position) must give exactly the table's final content.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import orjson
import psycopg
import pytest
from click.testing import CliRunner

from cdc.capture.runner import Capture
from cdc.cli import main

from .conftest import FREQUENT_CHECKS, CaptureEnv, require_messages
from .snapshot_check import (
    PacedWriter,
    differences,
    fill_items,
    replay,
    request_snapshot,
    settle,
    snapshot_state,
    table_rows,
    use_config,
    wait_state,
)
from .test_capture_crash import start_capture

# 100,000 by default (some seconds here); the benchmark reads 1,000,000
ROWS = int(os.environ.get("DISTRIBUTARY_SNAPSHOT_TEST_ROWS", "100000"))
ITEMS = "SELECT row_to_json(i) FROM items i"


def capture_sessions(dsn: str) -> int:
    """Client sessions on the database other than this one (the capture's, once the
    test's writer is done)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                           "current_database() AND backend_type = 'client backend' "
                           "AND pid <> pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


INCREMENTAL = ("incremental snapshots (cdc snapshot, tables joining the publication, "
               "snapshot: always on an existing slot)")


def test_incremental_snapshot_under_concurrent_writes(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    require_messages(env.dsn, INCREMENTAL)
    fill_items(env, ROWS)
    use_config(env, snapshot="never")
    run_capture()
    settle(env)
    sessions = capture_sessions(env.dsn)
    writer = PacedWriter(env.dsn, ROWS, rate=500)
    writer.start()
    request_snapshot(env, "--table", "public.items", "--chunk", "10000")
    done = wait_state(env, "public.items", "completed", timeout=600)
    transactions = writer.finish()
    settle(env)
    # the session chunks were read with is closed once nothing is left to read (it was
    # kept, idle, on the user's server until the capture stopped)
    deadline = time.monotonic() + 10
    while capture_sessions(env.dsn) > sessions and time.monotonic() < deadline:
        time.sleep(0.2)
    assert capture_sessions(env.dsn) == sessions
    assert transactions > 100, "the table changed while it was read"
    assert done.chunks in (ROWS // 10000, ROWS // 10000 + 1)  # the writer adds and deletes
    found = replay(env, "items")
    assert differences(table_rows(env, ITEMS, ("id",)), found) == ""
    reads = [m for m in env.events("items") if orjson.loads(m.value)["op"] == "r"]
    assert ROWS * 0.8 < len(reads) <= ROWS + transactions // 10 + 1


def test_a_killed_incremental_snapshot_resumes_after_its_last_chunk(
        capture_env: CaptureEnv) -> None:
    env = capture_env
    require_messages(env.dsn, INCREMENTAL)
    rows = 30_000
    fill_items(env, rows)
    use_config(env, snapshot="never")
    crashing = start_capture(env, "incremental_chunk:4")
    writer = PacedWriter(env.dsn, rows, rate=300)
    try:
        settle(env, timeout=60)  # streaming
        writer.start()
        request_snapshot(env, "--table", "public.items", "--chunk", "2000")
        assert crashing.wait(timeout=120) == -9, "killed after the 4th chunk's rows"
        before = snapshot_state(env, "public.items")
        assert before is not None and before.state == "running" and before.chunks == 3
        survivor = start_capture(env)
        try:
            done = wait_state(env, "public.items", "completed", timeout=180)
            writer.finish()
            settle(env)
        finally:
            survivor.terminate()
            survivor.wait(timeout=30)
    finally:
        writer.stop.set()
        crashing.kill()
    assert done.chunks in (rows // 2000, rows // 2000 + 1), "resumed: no chunk counted twice"
    found = replay(env, "items")
    assert differences(table_rows(env, ITEMS, ("id",)), found) == ""
    reads = [orjson.loads(m.value) for m in env.events("items")]
    read_ids = [e["key"]["id"] for e in reads if e["op"] == "r" and e["key"]["id"] <= rows]
    assert len(read_ids) <= rows + 2000, "the snapshot went on from chunk 4, not from 1"
    assert len(read_ids) > len(set(read_ids)), "chunk 4, appended before the kill, read again"


@pytest.mark.parametrize(("ddl", "fill", "key"), [
    ("CREATE TABLE things (region text, n int, label text, PRIMARY KEY (region, n))",
     "INSERT INTO things SELECT 'r' || (g % 7), g, 'x' || g FROM generate_series(1, 500) g",
     ("region", "n")),
    ("CREATE TABLE things (id uuid PRIMARY KEY, label text)",
     "INSERT INTO things SELECT md5(g::text)::uuid, 'x' || g FROM generate_series(1, 500) g",
     ("id",)),
    ("CREATE TABLE things (name text COLLATE \"C\" PRIMARY KEY, label text)",
     "INSERT INTO things SELECT 'name ' || g, 'it''s \\ ' || g FROM generate_series(1, 500) g",
     ("name",)),
    ("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');"
     "CREATE TABLE things (m mood, n int, label text, UNIQUE (m, n))",
     "ALTER TABLE things ALTER m SET NOT NULL, ALTER n SET NOT NULL;"
     "INSERT INTO things SELECT (ARRAY['happy','sad','ok'])[g % 3 + 1]::mood, g, 'x' FROM "
     "generate_series(1, 500) g; ALTER TABLE things REPLICA IDENTITY USING INDEX things_m_n_key",
     ("m", "n")),
], ids=["composite", "uuid", "text", "enum-unique-index"])
def test_any_key_type(capture_env: CaptureEnv, run_capture: Callable[[], Capture],
                      ddl: str, fill: str, key: tuple[str, ...]) -> None:
    env = capture_env
    require_messages(env.dsn, INCREMENTAL)
    env.sql(ddl, fill, "CREATE TABLE marker (id bigint PRIMARY KEY)")
    use_config(env, snapshot="never")
    run_capture()
    request_snapshot(env, "--table", "public.things", "--chunk", "37")
    done = wait_state(env, "public.things", "completed")
    assert done.rows == 500 and done.chunks == 500 // 37 + 1
    settle(env)
    found = replay(env, "things")
    assert differences(table_rows(env, "SELECT row_to_json(t) FROM things t", key), found) == ""


def test_a_table_without_a_key_is_refused_clearly(capture_env: CaptureEnv,
                                                  run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    require_messages(env.dsn, INCREMENTAL)
    env.sql("CREATE TABLE loose (a int, b text)", "ALTER TABLE loose REPLICA IDENTITY FULL")
    run_capture()
    result = CliRunner().invoke(main, ["snapshot", "-c", str(env.config_path),
                                       "--table", "public.loose"])
    assert result.exit_code == 1
    assert "public.loose has no primary key and no unique index" in result.output
    assert "ADD PRIMARY KEY" in result.output
    with psycopg.connect(env.dsn, autocommit=True) as conn:  # straight to the capture
        conn.execute("SELECT pg_logical_emit_message(false, 'distributary.snapshot', "
                     "'{\"action\": \"snapshot\", \"table\": \"public.loose\"}')")
    failed = wait_state(env, "public.loose", "failed")
    assert failed.reason is not None and "no primary key" in failed.reason


def test_cancel_and_status(capture_env: CaptureEnv, run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    require_messages(env.dsn, INCREMENTAL)
    fill_items(env, 20_000)
    use_config(env, snapshot="never")
    run_capture()
    request_snapshot(env, "--table", "public.items", "--chunk", "50")
    wait_state(env, "public.items", "running")
    refused = CliRunner().invoke(main, ["snapshot", "-c", str(env.config_path),
                                        "--table", "public.items"])
    assert refused.exit_code == 1 and "already running" in refused.output
    status = request_snapshot(env, "--status")
    assert "public.items" in status and "running" in status
    request_snapshot(env, "--table", "public.items", "--cancel")
    cancelled = wait_state(env, "public.items", "cancelled")
    assert 0 < cancelled.rows < 20_000
    assert "cancelled" in request_snapshot(env, "--status")


def test_a_table_joining_the_publication_is_snapshotted(
        capture_env: CaptureEnv, run_capture: Callable[..., Capture]) -> None:
    env = capture_env
    require_messages(env.dsn, INCREMENTAL)
    env.sql("CREATE TABLE first (id int PRIMARY KEY)",
            "CREATE TABLE later (id int PRIMARY KEY, v text)",
            "INSERT INTO later SELECT g, 'before' FROM generate_series(1, 3000) g")
    use_config(env, tables="[public.first]")
    run_capture(FREQUENT_CHECKS)
    env.sql(f"ALTER PUBLICATION {env.slot} ADD TABLE later")
    done = wait_state(env, "public.later", "completed", timeout=60)
    assert done.rows == 3000
    events = [orjson.loads(m.value) for m in env.events("later")]
    assert sorted(e["key"]["id"] for e in events if e["op"] == "r") == list(range(1, 3001))


def test_a_table_created_under_for_all_tables_is_not_read_again(
        capture_env: CaptureEnv, run_capture: Callable[..., Capture]) -> None:
    env = capture_env
    env.sql("CREATE TABLE marker (id bigint PRIMARY KEY)")
    run_capture(FREQUENT_CHECKS)  # the publication is FOR ALL TABLES
    env.sql("CREATE TABLE fresh (id int PRIMARY KEY)", "INSERT INTO fresh VALUES (1), (2)")
    settle(env)
    assert [orjson.loads(m.value)["op"] for m in env.wait_for("fresh", 2)] == ["c", "c"]
    assert snapshot_state(env, "public.fresh") is None, "its whole history is in the stream"


def test_snapshot_mode_always_reads_the_tables_again_at_each_start(
        capture_env: CaptureEnv) -> None:
    env = capture_env
    require_messages(env.dsn, INCREMENTAL)
    env.sql("CREATE TABLE kept (id int PRIMARY KEY, v text)",
            "CREATE TABLE marker (id bigint PRIMARY KEY)",
            "INSERT INTO kept SELECT g, 'v' FROM generate_series(1, 100) g")
    use_config(env, snapshot="always")
    for start in range(2):
        capture = start_capture(env)
        try:
            if start == 0:  # the slot is created: the initial snapshot
                assert len(env.wait_for("kept", 100)) == 100
                env.sql("UPDATE kept SET v = 'w' WHERE id = 1")
            else:  # the slot exists: an incremental snapshot while streaming
                wait_state(env, "public.kept", "completed", timeout=60)
            settle(env)
        finally:
            capture.terminate()
            capture.wait(timeout=30)
    events = [orjson.loads(m.value) for m in env.events("kept")]
    reads = [e for e in events if e["op"] == "r"]
    assert len(reads) == 200
    assert [e["source"]["snapshot"] for e in reads] == [True] * 200
    assert reads[-100]["key"] == {"id": 1} and reads[-100]["after"]["v"] == "w"
    assert differences(table_rows(env, "SELECT row_to_json(k) FROM kept k", ("id",)),
                       replay(env, "kept")) == ""


def test_read_values_equal_streamed_values(capture_env: CaptureEnv,
                                           run_capture: Callable[[], Capture]) -> None:
    """A row read by an incremental snapshot carries the values its insert streams: the
    types whose cast to text differs from their output (boolean, padded char(n), inet)."""
    env = capture_env
    require_messages(env.dsn, INCREMENTAL)
    env.sql("CREATE TABLE typed (id int PRIMARY KEY, b boolean, c char(5), addr inet, "
            "net cidr, flags boolean[], word varchar(4))",
            "INSERT INTO typed VALUES (1, true, 'ab', '10.0.0.1/32', '10.0.0.0/8', "
            "'{t,f,NULL}', 'x'), (2, false, 'abcde', '::1', '::/0', NULL, NULL)",
            "CREATE TABLE marker (id bigint PRIMARY KEY)")
    use_config(env, snapshot="never")
    run_capture()
    request_snapshot(env, "--table", "public.typed")
    wait_state(env, "public.typed", "completed")
    env.sql("INSERT INTO typed SELECT id + 100, b, c, addr, net, flags, word FROM typed")
    settle(env)
    events = {(value["op"], value["after"]["id"]): value
              for value in (orjson.loads(m.value) for m in env.events("typed"))}
    for row in (1, 2):
        read, streamed = events[("r", row)], events[("c", row + 100)]
        assert "unparsed" not in read and "unparsed" not in streamed
        assert {**read["after"], "id": 0} == {**streamed["after"], "id": 0}
    assert events[("r", 1)]["after"]["b"] is True
    assert events[("r", 1)]["after"]["c"] == "ab   "
    assert events[("r", 1)]["after"]["addr"] == "10.0.0.1"
