"""Initial snapshots that survive migrations and interruptions (issue #21, cases 3, 4 and 5).

- DDL while the snapshot runs (columns dropped, added, renamed, retyped; tables dropped
  and renamed) never crashes it, and every surviving table's rows arrive exactly.
- kill -9 in the middle of the snapshot, rows deleted and updated while it is down: the
  restart keeps the slot, keeps the tables already read, reads the rest while streaming
  (PostgreSQL 13, which cannot: takes the snapshot again on a new slot);
  the log replayed equals the table (no ghost rows), and positions are unique and grow
  per key across both attempts.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import orjson
import pytest

from cdc.capture.snapshot import read as snapshot_read
from cdc.capture.snapshot.incremental_log import read_records
from cdc.capture.snapshot.resume import initial_snapshot
from cdc.capture.source.messages import sends_messages
from cdc.log import Message, Position
from cdc.log.open import open_log

from .conftest import CaptureEnv, server_version
from .snapshot_check import (
    CaptureThread,
    differences,
    replay,
    settle,
    table_rows,
    use_config,
    wait_state,
)
from .test_capture_crash import start_capture

ROWS = 20_000
RESUMED_ROWS = 35_000  # snapshot batches of 10,000: a table spans four


def _fill(env: CaptureEnv, *tables: str, rows: int = ROWS) -> None:
    statements = ["CREATE TABLE marker (id bigint PRIMARY KEY)"]
    for table in tables:
        statements += [f"CREATE TABLE {table} (id int PRIMARY KEY, v text, x int)",
                       f"INSERT INTO {table} SELECT g, 'v' || g, g "  # noqa: S608
                       f"FROM generate_series(1, {rows}) g"]
    env.sql(*statements)
    env.sql(*[f"ANALYZE {table}" for table in tables])


def _assert_exact(env: CaptureEnv, table: str) -> None:
    expected = table_rows(env, f"SELECT row_to_json(t) FROM {table} t", ("id",))  # noqa: S608
    assert differences(expected, replay(env, table)) == "", table


@pytest.mark.parametrize("backend", ["file", "kafka"])
def test_ddl_during_the_initial_snapshot_never_crashes_it(
        capture_env: CaptureEnv, backend: str, monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest) -> None:
    env = capture_env
    tables = ["sd_1", "sd_2", "sd_3", "sd_4", "sd_5", "sd_6", "sd_7"]
    _fill(env, *tables)
    env.sql("INSERT INTO sd_1 SELECT g, 'v', g FROM generate_series(20001, 30000) g",
            "ANALYZE sd_1")  # the biggest: read first
    use_config(env, snapshot_parallel_tables="1")
    if backend == "kafka":
        _use_kafka(env, request.getfixturevalue("kafka_bootstrap"))
    migrated = threading.Event()
    original = snapshot_read._SnapshotWriter.rows

    def rows_then_migrate(self: Any, shape: Any, rows: list[list[str | None]]) -> None:
        if not migrated.is_set():  # while sd_1 is read, inside the exported snapshot
            migrated.set()
            env.sql("ALTER TABLE sd_2 DROP COLUMN x",
                    "ALTER TABLE sd_3 ADD COLUMN y int DEFAULT 7",
                    "DROP TABLE sd_4",
                    "ALTER TABLE sd_5 RENAME COLUMN x TO z",
                    "ALTER TABLE sd_6 ALTER COLUMN x TYPE bigint",  # rewritten
                    "ALTER TABLE sd_7 RENAME TO sd_7b",
                    "DELETE FROM sd_3 WHERE id <= 100")
        original(self, shape, rows)

    monkeypatch.setattr(snapshot_read._SnapshotWriter, "rows", rows_then_migrate)
    # read while streaming, by the watermark method; PostgreSQL 13 has none (no messages):
    # there their snapshots fail, saying so, and only the streamed changes arrive
    messages = sends_messages(server_version(env.dsn))
    with CaptureThread(env) as capture:
        settle(env)
        assert migrated.is_set()
        for table in ("sd_6", "sd_7b"):
            state = wait_state(env, f"public.{table}", "completed" if messages else "failed")
            assert messages or (state.reason or "").startswith("PostgreSQL 13: ")
        env.sql(*[f"INSERT INTO {t} (id, v) VALUES (50000, 'streamed')"  # noqa: S608
                  for t in ("sd_1", "sd_2", "sd_3", "sd_5", "sd_6", "sd_7b")],
                "UPDATE sd_5 SET z = -1 WHERE id = 5", "DELETE FROM sd_2 WHERE id = 9")
        settle(env)
        assert capture.stats.sessions == 1, "the snapshot never failed"
    for table in ("sd_1", "sd_2", "sd_3", "sd_5", *(("sd_6", "sd_7b") * messages)):
        _assert_exact(env, table)
    if not messages:
        for table in ("sd_6", "sd_7b"):
            assert [e["op"] for e in env.values(table)] == ["c"], "the streamed row only"
    assert "x" not in orjson.loads(env.events("sd_2")[0].value)["after"]
    assert {e["after"]["y"] for e in env.values("sd_3") if e["op"] == "r"} == {7}
    assert [orjson.loads(m.value)["op"] for m in env.events("sd_4")] == []


def _use_kafka(env: CaptureEnv, bootstrap: str) -> None:
    text = env.config_path.read_text()
    head = text[:text.index("log:")]
    env.config_path.write_text(head + f"""log:
  backend: kafka
  bootstrap_servers: [{bootstrap}]
  partitions: 3
""")


def _messages(env: CaptureEnv, table: str) -> list[Message]:
    event_log = open_log(env.config.log)
    try:
        return list(event_log.read_to_end(env.topic(table)))
    finally:
        event_log.close()


def _replayed(messages: list[Message]) -> dict[bytes, Any]:
    """The newest row image per key (by position), after the last truncate."""
    newest: dict[bytes, tuple[Position, Any]] = {}
    for message in sorted(messages, key=lambda m: m.position):
        event = orjson.loads(message.value)
        if event["op"] == "t":
            newest.clear()
        else:
            newest[message.key] = (message.position, event["after"])
    return {key: after for key, (_, after) in newest.items() if after is not None}


def _wait_exact(env: CaptureEnv, table: str, timeout: float = 120.0) -> list[Message]:
    expected = table_rows(env, f"SELECT row_to_json(t) FROM {table} t", ("id",))  # noqa: S608
    deadline = time.monotonic() + timeout
    while True:
        messages = _messages(env, table)
        found = differences(expected, _replayed(messages))
        if not found:
            return messages
        assert time.monotonic() < deadline, f"{table}: {found}"
        time.sleep(0.5)


def _check_positions(tables: dict[str, list[Message]]) -> None:
    """Row events: one position each across all tables; per key, positions grow in log
    order (per partition, by offset)."""
    seen: list[Position] = []
    for table, messages in tables.items():
        by_key: dict[bytes, list[Position]] = {}
        for message in sorted(messages, key=lambda m: (m.partition, m.offset)):
            if orjson.loads(message.value)["op"] != "t":
                by_key.setdefault(message.key, []).append(message.position)
                seen.append(message.position)
        for key, positions in by_key.items():
            assert positions == sorted(set(positions)), \
                f"{table} {key!r}: positions {positions} repeat or go back"
    assert len(seen) == len(set(seen)), "a position was used twice"


@pytest.mark.parametrize("backend", ["file", "kafka"])
def test_an_interrupted_snapshot_resumes_on_the_same_slot(
        capture_env: CaptureEnv, backend: str, request: pytest.FixtureRequest) -> None:
    env = capture_env
    tables = ["t1", "t2", "t3"]
    rows = RESUMED_ROWS
    _fill(env, *tables, rows=rows)
    use_config(env, snapshot_parallel_tables="1")
    if backend == "kafka":
        _use_kafka(env, request.getfixturevalue("kafka_bootstrap"))
    # batches of 10,000 rows: the 4th holds t1's last 5,000 and t2's first, and t1 is
    # recorded read once it is durable; killed once the 5th is durable (a file log has
    # written the 6th by then): t2 is read up to 15,000 or 25,000
    crashing = start_capture(env, "snapshot_batch:5")
    assert crashing.wait(timeout=120) == -signal.SIGKILL, "killed mid-snapshot"
    read_first = {t: len(_messages(env, t)) for t in tables}
    assert read_first["t1"] == rows and 0 < read_first["t2"] < rows, read_first
    env.sql(*[f"DELETE FROM {t} WHERE id % 100 = 7" for t in tables],  # noqa: S608
            *[f"UPDATE {t} SET v = 'changed' WHERE id % 100 = 8" for t in tables])  # noqa: S608
    survivor = start_capture(env)
    try:
        for table in tables:
            _wait_exact(env, table)
        env.sql("INSERT INTO t3 VALUES (90000, 'after', 1)", "DELETE FROM t1 WHERE id = 1")
        logged = {table: _wait_exact(env, table) for table in tables}
    finally:
        survivor.terminate()
        survivor.wait(timeout=30)
    _check_positions(logged)
    event_log = open_log(env.config.log)
    try:
        records = read_records(event_log, env.slot)
    finally:
        event_log.close()
    started = [r for r in records if r.get("slot") == env.slot and r.get("state") == "started"]
    recorded = initial_snapshot(records, env.slot)
    assert recorded.state == "completed" and "public.t1" in recorded.read
    t1_reads = [m for m in logged["t1"] if orjson.loads(m.value)["op"] == "r"]
    if sends_messages(server_version(env.dsn)):
        assert len(started) == 1, "the slot was never dropped and re-created"
        assert len(t1_reads) == rows, "a table read before the interruption is not read again"
    else:  # PostgreSQL 13: no incremental snapshots; the slot, never streamed from, is
        # dropped and the whole snapshot taken again on a new one, after truncate events
        assert len(started) == 2, "the snapshot was taken again on a new slot"
        assert len(t1_reads) == rows + rows - rows // 100  # less the rows deleted meanwhile
        assert [orjson.loads(m.value)["op"] for m in logged["t1"]].count("t") == 1
