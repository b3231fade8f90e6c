"""``source.schema_changes.confirm_above_rows``: a migrated table above the size guard is
not read again by itself, also when it was never analyzed (``pg_class.reltuples`` is 0
or -1 then: the guard asks the planner, which sizes it by its pages)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import orjson
import psycopg
import pytest

from cdc.capture.runner import Capture

from .conftest import CaptureEnv
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

    # the small table is read again: every row without the dropped column
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
