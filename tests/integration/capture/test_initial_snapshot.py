"""The initial snapshot: rows that existed before the slot, then the stream, no gap."""

from __future__ import annotations

import logging
from collections.abc import Callable

import orjson
import pytest

from cdc.capture.runner import Capture
from cdc.capture.source.messages import sends_messages

from .conftest import CaptureEnv, server_version


def test_existing_rows_are_read_then_changes_stream(capture_env: CaptureEnv,
                                                    run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    env.sql("CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric(12,2))",
            "INSERT INTO accounts SELECT g, 'owner ' || g, g * 1.5 FROM generate_series(1, 2500) g")
    run_capture()
    env.sql("UPDATE accounts SET balance = 0 WHERE id = 7",
            "INSERT INTO accounts VALUES (5000, 'late', 1)")
    events = [orjson.loads(m.value) for m in env.wait_for("accounts", 2502)]
    reads = [e for e in events if e["op"] == "r"]
    assert len(reads) == 2500
    assert sorted(e["key"]["id"] for e in reads) == list(range(1, 2501))
    assert all(e["source"]["snapshot"] is True for e in reads)
    by_id = {e["key"]["id"]: e for e in reads}
    assert by_id[7]["after"] == {"id": 7, "owner": "owner 7", "balance": "10.50"}
    assert [(e["op"], e["key"]["id"]) for e in events[2500:]] == [("u", 7), ("c", 5000)]
    assert events[2500]["after"]["balance"] == "0.00"
    assert events[2500]["source"]["snapshot"] is False
    assert len(events) == 2502, "no overlap between the snapshot and the stream"


# batches of 10,000 rows: killed once the 2nd is durable (a file log has written the 3rd
# by then), or while the 2nd is written, between two of its partitions (its lines in the
# first, none in the others; the 1st batch's sync may still run)
@pytest.mark.parametrize("crash_at", ["snapshot_batch:2", "mid_append:4"])
def test_an_interrupted_snapshot_is_taken_again(capture_env: CaptureEnv, crash_at: str) -> None:
    from .test_capture_crash import start_capture

    env = capture_env
    env.sql("CREATE TABLE items (id int PRIMARY KEY, v text)",
            "INSERT INTO items SELECT g, 'v' FROM generate_series(1, 45000) g")
    crashing = start_capture(env, crash_at)
    assert crashing.wait(timeout=60) == -9, "killed in the middle of the snapshot"
    before_crash = len(env.events("items"))
    assert 0 < before_crash < 45000
    # PostgreSQL 13 takes the snapshot again on a new slot, after a truncate event
    again = 45000 + (not sends_messages(server_version(env.dsn)))
    survivor = start_capture(env)
    try:
        env.wait_for("items", before_crash + again)  # the rows before the crash, read twice
        env.sql("INSERT INTO items VALUES (90000, 'streamed')")
        events = [orjson.loads(m.value)
                  for m in env.wait_for("items", before_crash + again + 1)]
    finally:
        survivor.terminate()
        survivor.wait(timeout=30)
    reads = {e["key"]["id"] for e in events if e["op"] == "r"}
    assert reads == set(range(1, 45001)), "every row read by the snapshot taken again"
    assert [e["key"]["id"] for e in events if e["op"] == "c"] == [90000]


def test_a_slot_created_by_hand_is_never_dropped(capture_env: CaptureEnv,
                                                 run_capture: Callable[[], Capture]) -> None:
    import psycopg
    from psycopg import sql

    env = capture_env
    env.sql("CREATE TABLE t (id int PRIMARY KEY)")
    with psycopg.connect(env.dsn, autocommit=True) as conn:  # publication first, as PG needs
        conn.execute(sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES")
                     .format(sql.Identifier(env.slot)))
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (env.slot,))
        conn.execute("INSERT INTO t VALUES (1)")  # after the slot: streamed, not read
    run_capture()
    events = [orjson.loads(m.value) for m in env.wait_for("t", 1)]
    assert [(e["op"], e["key"]) for e in events] == [("c", {"id": 1})]


def test_initial_snapshot_under_concurrent_writes(capture_env: CaptureEnv,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """Rows: DISTRIBUTARY_SNAPSHOT_TEST_ROWS (200,000 by default; `make bench-snapshot`
    reads 1,000,000, and so does this test with the variable set so). The table (~10 MB)
    is read as page ranges of 1 MiB by two connections at once, while updates move rows
    from page to page."""
    import os

    from .snapshot_check import (
        CaptureThread,
        PacedWriter,
        differences,
        fill_items,
        replay,
        settle,
        table_rows,
        use_config,
    )

    env = capture_env
    rows = int(os.environ.get("DISTRIBUTARY_SNAPSHOT_TEST_ROWS", "200000"))
    fill_items(env, rows)
    use_config(env, snapshot_range_mb="1", snapshot_parallel_tables="2")
    caplog.set_level(logging.INFO, logger="cdc.capture.snapshot.read")
    writer = PacedWriter(env.dsn, rows, rate=500)
    writer.start()
    try:
        with CaptureThread(env):  # creates the slot, reads the table as the writer goes on
            settle(env, timeout=300)
            transactions = writer.finish()
            settle(env)
    finally:
        writer.stop.set()
    assert transactions > 100, "the table changed while it was read"
    ranged = server_version(env.dsn) >= 140000  # TID range scans: PostgreSQL 14+
    assert ("(1 read as " in caplog.text) == ranged, caplog.text[-2000:]
    found = replay(env, "items")
    expected = table_rows(env, "SELECT row_to_json(i) FROM items i", ("id",))
    assert differences(expected, found) == ""


def test_tables_are_read_in_parallel_with_unique_positions(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture]) -> None:
    from .snapshot_check import use_config

    env = capture_env
    env.sql(*[statement for name in ("a", "b", "c") for statement in (
        f"CREATE TABLE {name} (id int PRIMARY KEY, v text)",
        f"INSERT INTO {name} SELECT g, E'tab\\there\\nnewline\\\\' || g "  # noqa: S608
        "FROM generate_series(1, 12000) g")])
    use_config(env, snapshot_parallel_tables="3")
    run_capture()
    positions = []
    for name in ("a", "b", "c"):
        messages = env.wait_for(name, 12000)
        events = [orjson.loads(m.value) for m in messages]
        assert sorted(e["key"]["id"] for e in events) == list(range(1, 12001))
        assert events[0]["after"]["v"].startswith("tab\there\nnewline\\")
        positions += [m.position for m in messages]
    assert len(set(positions)) == 36000, "one position per row across the tables"
