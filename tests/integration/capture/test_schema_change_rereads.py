"""Re-reads after a migration that changed rows without writing them.

With the DDL capture installed, the ``ALTER TABLE``'s message starts the re-read at once
(without it, the table's next row change does; ``tests/integration/test_migrations.py``),
and the Relation message that follows does not start it over.
``source.schema_changes.confirm_above_rows``: a migrated table above the size guard is
not read again by itself, also when it was never analyzed (``pg_class.reltuples`` is 0
or -1 then: the guard asks the planner, which sizes it by its pages)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
import psycopg
import pytest

from cdc.capture.lsn import parse_lsn
from cdc.capture.runner import Capture
from cdc.capture.schema.ddl import install
from cdc.capture.snapshot.incremental_log import TableSnapshot
from cdc.capture.source.messages import sends_messages
from cdc.log import Message

from .conftest import CaptureEnv, require_messages, server_version
from .snapshot_check import snapshot_state, use_config, wait_state

BIG_ROWS = 40_000
GUARD_ROWS = 10_000  # above the planner's 10-page minimum for a tiny table


def _events_after(env: CaptureEnv, table: str, first: int) -> list[dict[str, object]]:
    return [orjson.loads(m.value) for m in env.events(table)][first:]


def test_a_never_analyzed_table_above_the_guard_waits_for_cdc_snapshot(
        capture_env: CaptureEnv, run_capture: Callable[..., Capture],
        caplog: pytest.LogCaptureFixture) -> None:
    env = capture_env
    env.sql(*(f"CREATE TABLE {table} (id int PRIMARY KEY, v int, note text) "
              "WITH (autovacuum_enabled = false)" for table in ("big", "small")))
    use_config(env, schema_changes=f"{{confirm_above_rows: {GUARD_ROWS}}}")
    run_capture()
    with psycopg.connect(env.dsn) as conn:
        for table, rows in ((b"big", BIG_ROWS), (b"small", 10)):
            conn.execute(b"INSERT INTO " + table + b" SELECT g, 0, 'secret ' || g"
                         b" FROM generate_series(1, %s) g", (rows,))
    assert len(env.wait_for("big", BIG_ROWS)) == BIG_ROWS
    assert len(env.wait_for("small", 10)) == 10
    with psycopg.connect(env.dsn) as conn:
        (reltuples,) = conn.execute(
            "SELECT reltuples FROM pg_class WHERE oid = 'big'::regclass").fetchone() or (None,)
    assert reltuples is not None and reltuples <= 0, "the table must be one never analyzed"

    caplog.set_level(logging.INFO, logger="cdc.capture")
    env.sql("ALTER TABLE big DROP COLUMN note", "ALTER TABLE small DROP COLUMN note")
    env.sql("UPDATE big SET v = 1 WHERE id = 1", "UPDATE small SET v = 1 WHERE id = 1")

    # the small table is read again: every row without the dropped column (PostgreSQL 13
    # records the re-read as failed: no watermarks there; README, versions)
    if not sends_messages(server_version(env.dsn)):
        wait_state(env, "public.small", "failed")
        assert snapshot_state(env, "public.big") is None
        return
    wait_state(env, "public.small", "completed")
    reread = [e for e in _events_after(env, "small", 10) if e["op"] == "r"]
    assert sorted(e["key"]["id"] for e in reread) == list(range(1, 11))  # type: ignore[index]
    assert all("note" not in e["after"] for e in reread)  # type: ignore[operator]

    # the big one only logs the change and names the command; its one update is all
    assert snapshot_state(env, "public.big") is None
    assert [e["op"] for e in _events_after(env, "big", BIG_ROWS)] == ["u"]
    warnings = [r.getMessage() for r in caplog.records
                if "confirm_above_rows" in r.getMessage()]
    assert len(warnings) == 1 and "public.big" in warnings[0], warnings
    assert "cdc snapshot -c <pipeline.yaml> --table public.big" in warnings[0]


def _reread_after(env: CaptureEnv, table: str, lsn: int,
                  timeout: float = 60.0) -> TableSnapshot:
    """Wait for a completed re-read of ``table`` requested after ``lsn``."""
    deadline = time.monotonic() + timeout
    while True:
        found = snapshot_state(env, table)
        if found is not None and found.state == "completed" \
                and parse_lsn(found.request_lsn) > lsn:
            return found
        assert time.monotonic() < deadline, f"{table}: no re-read after {lsn:X}: {found}"
        time.sleep(0.2)


def _wait_for_update(env: CaptureEnv, table: str, key: int,
                     timeout: float = 60.0) -> list[Message]:
    """The table's events once an update of ``key`` is among them."""
    deadline = time.monotonic() + timeout
    while True:
        found = env.events(table)
        if any(orjson.loads(m.value)["op"] == "u" and orjson.loads(m.key)["id"] == key
               for m in found):
            return found
        assert time.monotonic() < deadline, f"no update of {table} {key} in the log"
        time.sleep(0.2)


def test_with_the_ddl_capture_a_migration_is_read_again_before_any_write(
        capture_env: CaptureEnv, run_capture: Callable[..., Capture],
        caplog: pytest.LogCaptureFixture) -> None:
    env = capture_env
    require_messages(env.dsn, "the DDL capture (cdc ddl install)")
    env.sql("CREATE TABLE quiet (id int PRIMARY KEY, v int, note text)")
    with psycopg.connect(env.dsn, autocommit=True) as conn:
        install(conn)
    run_capture()
    env.sql("INSERT INTO quiet SELECT g, 0, 'secret ' || g FROM generate_series(1, 50) g")
    assert len(env.wait_for("quiet", 50)) == 50
    caplog.set_level(logging.INFO, logger="cdc.capture")

    # nobody writes the table after its migration: the DDL message alone starts the re-read
    env.sql("ALTER TABLE quiet DROP COLUMN note")
    first = _reread_after(env, "public.quiet", 0)
    events = _events_after(env, "quiet", 50)
    assert sorted(e["key"]["id"] for e in events) == list(range(1, 51))  # type: ignore[index]
    assert all(e["op"] == "r" and "note" not in e["after"] for e in events)  # type: ignore[operator]

    # a write right after the next migration brings its Relation message: one re-read
    env.sql("ALTER TABLE quiet ADD COLUMN flag boolean NOT NULL DEFAULT true")
    env.sql("UPDATE quiet SET v = 1 WHERE id = 1")
    second = _reread_after(env, "public.quiet", parse_lsn(first.request_lsn))
    # row 1, updated while the chunk was read, may be the stream's alone (watermarks)
    assert second.chunks == 1 and second.rows in (49, 50), second
    env.sql("UPDATE quiet SET v = 2 WHERE id = 2")  # after the re-read: no other one
    logged = _wait_for_update(env, "quiet", key=2)
    ops = [orjson.loads(m.value)["op"] for m in logged[100:]]
    assert ops.count("r") == second.rows and ops.count("u") == 2, ops
    started = [r.getMessage() for r in caplog.records
               if "reading the table again" in r.getMessage()]
    assert len(started) == 2, started
    assert "dropped note" in started[0] and "added flag" in started[1], started


def test_with_the_ddl_capture_an_altered_type_is_recorded_and_read_again_before_any_write(
        capture_env: CaptureEnv, run_capture: Callable[..., Capture]) -> None:
    """PostgreSQL announces no ``ALTER TYPE … ADD ATTRIBUTE``; with the DDL capture its
    message alone gives the table its new schema version and reads its rows again."""
    env = capture_env
    require_messages(env.dsn, "the DDL capture (cdc ddl install)")
    env.sql("CREATE TYPE pair AS (a int, b int)",
            "CREATE TABLE pairs (id int PRIMARY KEY, p pair)")
    with psycopg.connect(env.dsn, autocommit=True) as conn:
        install(conn)
    run_capture()
    env.sql("INSERT INTO pairs VALUES (1, ROW(1, 2)), (2, ROW(3, 4))")
    assert len(env.wait_for("pairs", 2)) == 2

    env.sql("ALTER TYPE pair ADD ATTRIBUTE c int CASCADE")  # nobody writes pairs after it
    _reread_after(env, "public.pairs", 0)
    events: list[dict[str, Any]] = env.values("pairs")
    first = events[0]["schema_version"]
    reread = {e["key"]["id"]: e for e in events[2:]}
    assert sorted(reread) == [1, 2] and {e["op"] for e in reread.values()} == {"r"}
    assert reread[1]["after"]["p"] == {"a": 1, "b": 2, "c": None}
    assert reread[2]["after"]["p"] == {"a": 3, "b": 4, "c": None}
    assert {e["schema_version"] for e in reread.values()} == {first + 1}
    log = env.open_log()
    try:
        recorded = [orjson.loads(m.value) for m in log.read_to_end(f"{env.slot}._schemas")]
    finally:
        log.close()
    latest = max((r for r in recorded if r["table"] == "pairs"),
                 key=lambda record: record["schema_version"])
    detail = {c["name"]: c["type_detail"] for c in latest["columns"]}["p"]
    assert latest["schema_version"] == first + 1
    assert [a["name"] for a in detail["attributes"]] == ["a", "b", "c"]
