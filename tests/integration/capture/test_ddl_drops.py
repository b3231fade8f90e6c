"""DROP TABLE with the DDL capture installed, against real PostgreSQL and the real capture:
the log's readers end with the table empty (issue 19, "Drop and re-create")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import psycopg
from click.testing import CliRunner

from cdc.capture.runner import Capture
from cdc.capture.schema import ddl
from cdc.cli import main

from .conftest import CaptureEnv, require_messages
from .test_capture_fidelity import _replayed, _topic_values


def _cdc(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


DDL_CAPTURE = "the DDL capture (cdc ddl install, dropped-table events)"


def _ops(events: list[dict[str, Any]]) -> str:
    return "".join(e["op"] for e in events)


def test_dropped_tables_are_emptied_downstream(capture_env: CaptureEnv,
                                               run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    require_messages(env.dsn, DDL_CAPTURE)
    _cdc("ddl", "install", "-c", str(env.config_path))
    env.sql("CREATE TABLE gone (id int PRIMARY KEY, v text)",
            "INSERT INTO gone VALUES (1, 'snapshot')",
            "CREATE TABLE kept (id int PRIMARY KEY)",
            "CREATE SCHEMA side", "CREATE TABLE side.inner_t (id int PRIMARY KEY)")
    run_capture()
    env.sql("INSERT INTO gone VALUES (2, 'streamed')", "INSERT INTO side.inner_t VALUES (1)",
            "INSERT INTO kept VALUES (1)")
    with psycopg.connect(env.dsn) as conn:  # rolled back: nothing happened
        conn.execute("DROP TABLE kept")
        conn.rollback()
    env.sql("CREATE TABLE never_captured (id int)")  # no row ever: the log knows nothing
    env.sql("DROP TABLE gone, never_captured")
    env.sql("DROP SCHEMA side CASCADE")
    env.sql("INSERT INTO kept VALUES (2)")  # after everything above, in commit order
    env.wait_for("kept", 2)

    gone = env.values("gone")
    assert _ops(gone) == "rct" and gone[-1]["truncate"]["dropped"] is True
    assert _replayed(gone) == {}
    inner = _topic_values(env, f"{env.slot}.side.inner_t", 2)
    assert _ops(inner) == "ct" and _replayed(inner) == {}
    assert _ops(env.values("kept")) == "cc", "a rolled-back DROP truncates nothing"
    assert env.events("never_captured") == []
    drops = [e for e in _topic_values(env, f"{env.slot}._ddl", 3)
             if e["message"]["content"].get("event") == "sql_drop"]
    assert [[(t["schema"], t["name"]) for t in d["message"]["content"]["dropped"]]
            for d in drops] == [[("public", "gone"), ("public", "never_captured")],
                                [("side", "inner_t")]]
    # each truncate sits in its dropping transaction, right after the DDL message
    for drop, truncate in zip(drops, (gone[-1], inner[-1]), strict=True):
        assert truncate["source"]["commit_lsn"] == drop["source"]["commit_lsn"]
        assert truncate["source"]["seq"] == drop["source"]["seq"] + 1


def test_dropped_and_created_again_keeps_only_the_new_rows(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    require_messages(env.dsn, DDL_CAPTURE)
    _cdc("ddl", "install", "-c", str(env.config_path))
    env.sql("CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t VALUES (1, 'old')",
            "CREATE TABLE u (id int PRIMARY KEY, v text)", "INSERT INTO u VALUES (1, 'old')")
    run_capture()
    env.sql("INSERT INTO t VALUES (2, 'old')", "INSERT INTO u VALUES (2, 'old')")
    env.sql("DROP TABLE t", "CREATE TABLE t (id int PRIMARY KEY, v text)",  # one transaction
            "INSERT INTO t VALUES (2, 'new'), (3, 'new')")
    env.sql("DROP TABLE u")  # and in two
    env.sql("CREATE TABLE u (id int PRIMARY KEY, v text)", "INSERT INTO u VALUES (3, 'new')")
    env.wait_for("t", 6)
    env.wait_for("u", 5)
    for table, new_ids in (("t", [2, 3]), ("u", [3])):
        events = env.values(table)
        ops = _ops(events)
        first_new = ops.index("c", ops.index("t"))
        assert ops.startswith("rc") and set(ops[2:first_new]) == {"t"}, ops
        assert 1 <= ops.count("t") <= 2 and "t" not in ops[first_new:], ops
        flags = {key for e in events if e["op"] == "t" for key in e["truncate"]}
        assert "dropped" in flags, (table, events)
        assert sorted(row["id"] for row in _replayed(events).values()) == new_ids
        assert all(row["v"] == "new" for row in _replayed(events).values())


def test_install_adds_the_drop_trigger_to_an_older_install(capture_env: CaptureEnv) -> None:
    env = capture_env
    require_messages(env.dsn, DDL_CAPTURE)
    config = str(env.config_path)
    with psycopg.connect(env.dsn, autocommit=True) as conn:  # what an older version made
        for statement in ddl.install_statements()[:4]:
            conn.execute(statement)
    status = _cdc("ddl", "status", "-c", config)
    assert "warn  ddl capture: event trigger distributary_ddl_drop is missing" in status
    assert "ok    ddl capture: event trigger distributary_ddl on ddl_command_end" in status
    _cdc("ddl", "install", "-c", config)
    status = _cdc("ddl", "status", "-c", config)
    assert "warn" not in status, status
    assert "event trigger distributary_ddl_drop on sql_drop runs " \
           "distributary_emit_ddl_drop()" in status
    assert "distributary_ddl_drop" in _cdc("ddl", "uninstall", "-c", config)
    with psycopg.connect(env.dsn) as conn:
        left = conn.execute("SELECT (SELECT count(*) FROM pg_event_trigger WHERE evtname "
                            "LIKE 'distributary%%'), (SELECT count(*) FROM pg_proc WHERE "
                            "proname LIKE 'distributary_emit%%')").fetchone()
    assert left == (0, 0)
    assert "not installed" in _cdc("ddl", "status", "-c", config)


def test_the_printed_sql_creates_both_triggers() -> None:
    output = _cdc("ddl", "install", "--sql")
    assert 'CREATE EVENT TRIGGER "distributary_ddl_drop" ON sql_drop' in output
    assert "pg_event_trigger_dropped_objects()" in output
    assert orjson.dumps(ddl.DDL_PREFIX).decode().replace('"', "'") in output
