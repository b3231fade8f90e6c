"""Optional DDL capture against real PostgreSQL: install, capture, uninstall, doctor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from cdc.capture.runner import Capture
from cdc.capture.schema.ddl import install
from cdc.cli import main
from cdc.errors import SourceError
from cdc.log import Message

from .conftest import CaptureEnv, require_messages
from .snapshot_check import use_config
from .test_schema_evolution import versions_of


def _cdc(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


DDL_CAPTURE = "the DDL capture (cdc ddl install)"


def _ddl_events(env: CaptureEnv, count: int, timeout: float = 30) -> list[Message]:
    env_topic = env.topic
    try:  # CaptureEnv.topic knows tables and "messages"; the DDL topic is <prefix>._ddl
        env.topic = lambda table: f"{env.slot}.{table}"  # type: ignore[method-assign]
        return env.wait_for("_ddl", count, timeout=timeout)
    finally:
        env.topic = env_topic  # type: ignore[method-assign]


def _content(message: Message) -> dict[str, Any]:
    event = orjson.loads(message.value)
    assert event["op"] == "m" and event["message"]["prefix"] == "distributary.ddl"
    assert event["message"]["transactional"] is True
    content: dict[str, Any] = event["message"]["content"]
    return content


def test_install_capture_uninstall_and_doctor(capture_env: CaptureEnv,
                                              run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    require_messages(env.dsn, DDL_CAPTURE)
    config = str(env.config_path)
    env.sql("CREATE TABLE t (id int PRIMARY KEY, a int)")
    code, output = _cdc("doctor", "-c", config)
    assert "ddl capture: event trigger distributary_ddl not installed" in output, output

    code, output = _cdc("ddl", "install", "-c", config)
    assert code == 0 and "installed event trigger distributary_ddl" in output, output
    code, output = _cdc("ddl", "install", "-c", config)  # idempotent
    assert code == 0, output
    code, output = _cdc("doctor", "-c", config)
    assert "ok    ddl capture: event trigger distributary_ddl on ddl_command_end runs " \
           "distributary_emit_ddl()" in output, output
    code, output = _cdc("ddl", "status", "-c", config)
    assert code == 0 and "ok    ddl capture" in output and "not installed" not in output

    use_config(env, schema_changes="{default: ignore}")  # no re-reads
    run_capture()
    env.sql("INSERT INTO t VALUES (1, 10)")
    alter = "ALTER TABLE t ADD COLUMN note text DEFAULT 'n'"
    env.sql(alter, "UPDATE t SET note = 'first' WHERE id = 1")  # one transaction
    with psycopg.connect(env.dsn) as conn:  # rolled back: never recorded
        conn.execute("ALTER TABLE t ADD COLUMN gone int")
        conn.rollback()
    env.sql("CREATE INDEX t_a ON t (a)")
    (ddl_alter, ddl_index) = _ddl_events(env, 2)
    content = _content(ddl_alter)
    assert content["tag"] == "ALTER TABLE" and content["command"] == alter
    assert content["objects"] == [{"type": "table", "identity": "public.t", "schema": "public"}]
    assert content["database"] == env.slot and content["user"]
    assert _content(ddl_index)["tag"] == "CREATE INDEX"
    assert _content(ddl_index)["command"] == "CREATE INDEX t_a ON t (a)"

    # the DDL sits in its transaction, just before the first event of the new version
    (_, update) = env.wait_for("t", 2)
    ddl_source = orjson.loads(ddl_alter.value)["source"]
    update_event = orjson.loads(update.value)
    assert update_event["source"]["commit_lsn"] == ddl_source["commit_lsn"]
    assert ddl_alter.position < update.position
    assert update_event["schema_version"] == 2
    assert [c["name"] for c in versions_of(env, "t")[2]["columns"]] == ["id", "a", "note"]

    code, output = _cdc("ddl", "uninstall", "-c", config)
    assert code == 0 and "removed event trigger distributary_ddl" in output, output
    env.sql("ALTER TABLE t ADD COLUMN after_uninstall int", "UPDATE t SET a = 2")
    env.wait_for("t", 3)  # the capture is past the ALTER: its DDL would be in the log
    assert len(_ddl_events(env, 3, timeout=0)) == 2, "nothing recorded once uninstalled"
    code, output = _cdc("doctor", "-c", config)
    assert "ddl capture: event trigger distributary_ddl not installed" in output, output
    with psycopg.connect(env.dsn) as conn:
        left = conn.execute("SELECT count(*) FROM pg_proc WHERE proname = "
                            "'distributary_emit_ddl'").fetchone()
    assert left == (0,)


def test_a_role_without_replication_runs_ddl_and_may_not_install(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    require_messages(env.dsn, DDL_CAPTURE)
    role = f"{env.slot}_app"
    env.sql(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)).as_string(None),
            sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(role))
            .as_string(None))
    try:
        assert _cdc("ddl", "install", "-c", str(env.config_path))[0] == 0
        use_config(env, schema_changes="{default: ignore}")  # no re-reads
        run_capture()
        with psycopg.connect(env.dsn) as conn:  # a migration by an ordinary role
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
            conn.execute("CREATE TABLE owned_by_app (id int PRIMARY KEY)")
        (created,) = _ddl_events(env, 1)
        assert _content(created)["command"] == "CREATE TABLE owned_by_app (id int PRIMARY KEY)"
        with psycopg.connect(env.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
            with pytest.raises(SourceError, match="event triggers need a superuser"):
                install(conn)
    finally:
        with psycopg.connect(env.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_install_sql_is_printed_for_a_dba() -> None:
    code, output = _cdc("ddl", "install", "--sql")
    assert code == 0
    assert "CREATE EVENT TRIGGER \"distributary_ddl\" ON ddl_command_end" in output
    assert "SECURITY DEFINER" in output and "'distributary.ddl'" in output
    code, output = _cdc("ddl", "--help")
    assert "Example" in output and "cdc ddl install -c pipeline.yaml" in output
