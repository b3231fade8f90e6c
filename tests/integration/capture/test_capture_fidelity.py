"""Issue 19 against real PostgreSQL: pinned session settings, any table name, a value the
codecs cannot read, a table dropped and created again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import psycopg
import pytest
from psycopg import conninfo, sql

from cdc.capture.runner import Capture
from cdc.capture.schema.topics import topic_findings
from cdc.errors import ConfigError
from cdc.log import StartAt
from cdc.log.file import FileLog

from .conftest import CaptureEnv


def _topic_values(env: CaptureEnv, topic: str, count: int,
                  timeout: float = 30.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        log = FileLog(env.log_dir)
        found: list[Any] = []
        if topic in log.admin().topics():
            consumer = log.consumer(f"check-{time.monotonic_ns()}", topics=[topic],
                                    start=StartAt.earliest())
            try:
                while batch := consumer.poll(10_000, timeout=0.3):
                    found.extend(batch)
            finally:
                consumer.close()
        log.close()
        if len(found) >= count or time.monotonic() > deadline:
            return [orjson.loads(m.value) for m in sorted(found, key=lambda m: m.position)]
        time.sleep(0.2)


def _replayed(events: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """The table a reader of the log ends with (truncate empties it)."""
    state: dict[Any, dict[str, Any]] = {}
    for event in events:
        if event["op"] == "t":
            state.clear()
        elif event["op"] == "d":
            state.pop(orjson.dumps(event["key"]), None)
        else:
            state[orjson.dumps(event["key"])] = event["after"]
    return state


def test_database_and_role_settings_do_not_change_the_values(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    database = conninfo.conninfo_to_dict(env.dsn)["dbname"]
    with psycopg.connect(env.dsn, autocommit=True) as conn:
        role = conn.execute("SELECT current_user").fetchone()[0]  # type: ignore[index]
        for name, value in [("extra_float_digits", "0"), ("DateStyle", "SQL, DMY"),
                            ("IntervalStyle", "sql_standard"), ("TimeZone", "Asia/Kolkata")]:
            conn.execute(sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                sql.Identifier(str(database)), sql.Identifier(name), sql.Literal(value)))
        conn.execute(sql.SQL("ALTER ROLE {} IN DATABASE {} SET bytea_output = 'escape'")
                     .format(sql.Identifier(role), sql.Identifier(str(database))))
    env.sql("CREATE TABLE v (id int PRIMARY KEY, f float8, d date, ts timestamptz, "
            "i interval, b bytea)",
            "INSERT INTO v VALUES (1, 0.1::float8 + 0.2::float8, '2026-03-04', "
            "'2026-01-02 03:04:05+00', '-1 day +02:03:04', '\\x00ff41')")
    run_capture()
    env.sql("INSERT INTO v VALUES (2, 0.1::float8 + 0.2::float8, '2026-03-04', "
            "'2026-01-02 03:04:05+00', '-1 day +02:03:04', '\\x00ff41')")
    env.wait_for("v", 2)
    events = env.values("v")
    assert [e["op"] for e in events] == ["r", "c"]
    for event in events:
        after = event["after"]
        assert after["f"] == 0.30000000000000004, event["op"]
        assert after["d"] == "2026-03-04" and after["ts"] == "2026-01-02T03:04:05Z"
        assert after["b"] == "AP9B"  # base64 of 00 ff 41
        assert after["i"] == "P-1DT2H3M4S"  # not sql_standard's '-1 +2:03:04'


def test_a_table_name_no_topic_can_hold_does_not_stop_the_capture(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    env.sql('CREATE SCHEMA "Sales Dept"',
            'CREATE TABLE "Sales Dept"."Order Items" (id int PRIMARY KEY, "Qty." int)',
            "CREATE TABLE plain (id int PRIMARY KEY)")
    run_capture()
    env.sql('INSERT INTO "Sales Dept"."Order Items" VALUES (1, 5)')
    env.sql("INSERT INTO plain VALUES (1)")
    assert len(env.wait_for("plain", 1)) == 1, "the other tables go on flowing"
    events = _topic_values(env, f"{env.slot}.Sales_x20_Dept.Order_x20_Items", 1)
    assert [e["after"] for e in events] == [{"id": 1, "Qty.": 5}]
    assert (events[0]["source"]["schema"], events[0]["source"]["table"]) == (
        "Sales Dept", "Order Items")


def test_a_value_the_codec_cannot_read_is_kept_as_text(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    run_capture()
    # the type and the table are new in this transaction: the capture first reads the type
    # once it committed, with 3 attributes, while the row's value has 2 — the composite
    # codec refuses it, and the type read again is no different
    env.sql("CREATE TYPE pair AS (a int, b int)",
            "CREATE TABLE pairs (id int PRIMARY KEY, p pair)",
            "INSERT INTO pairs VALUES (1, ROW(1, 2))",
            "ALTER TYPE pair ADD ATTRIBUTE c int CASCADE")
    env.sql("INSERT INTO pairs VALUES (2, ROW(3, 4, 5))")
    env.wait_for("pairs", 2)
    events = env.values("pairs")
    assert [e["key"] for e in events] == [{"id": 1}, {"id": 2}]
    assert events[0]["after"]["p"] == "(1,2)" and events[0]["unparsed"] == ["p"]
    assert events[1]["after"]["p"] == {"a": 3, "b": 4, "c": 5} and "unparsed" not in events[1]


@pytest.mark.parametrize("alter", ["ADD ATTRIBUTE c int", "DROP ATTRIBUTE b"])
def test_a_composite_type_altered_while_streaming_is_read_again(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture], alter: str) -> None:
    env = capture_env
    env.sql("CREATE TYPE pair AS (a int, b int)",
            "CREATE TABLE pairs (id int PRIMARY KEY, p pair, ps pair[])")
    run_capture()
    env.sql("INSERT INTO pairs VALUES (1, ROW(1, 2), ARRAY[ROW(1, 2)::pair])")
    env.wait_for("pairs", 1)  # the capture knows the type with 2 attributes
    # no Relation or Type message follows an ALTER TYPE: the capture reads the type again
    # when a value does not fit it
    env.sql(f"ALTER TYPE pair {alter} CASCADE")
    env.sql("INSERT INTO pairs SELECT 2, p, ps FROM pairs WHERE id = 1",
            "UPDATE pairs SET p.a = 7 WHERE id = 2")
    env.wait_for("pairs", 3)
    events = env.values("pairs")
    assert events[0]["after"]["p"] == {"a": 1, "b": 2}
    expected = ({"a": 7, "b": 2, "c": None} if alter.startswith("ADD")
                else {"a": 7})
    assert events[2]["after"]["p"] == expected and "unparsed" not in events[2]
    assert events[2]["after"]["ps"] == [{k: v for k, v in expected.items() if k != "a"}
                                        | {"a": 1}]
    # the values after the ALTER carry a new schema version, whose record describes the
    # type as it is now (readers that type what they store, e.g. OpenSearch's mappings)
    first, after = events[0]["schema_version"], events[1]["schema_version"]
    assert after == first + 1 and events[2]["schema_version"] == after
    records = {record["schema_version"]: record for record in _topic_values(
        env, f"{env.slot}._schemas", 2) if record["table"] == "pairs"}
    details = {version: {c["name"]: c["type_detail"] for c in record["columns"]}
               for version, record in records.items()}
    attributes = [a["name"] for a in details[after]["p"]["attributes"]]
    assert [a["name"] for a in details[first]["p"]["attributes"]] == ["a", "b"]
    assert attributes == (["a", "b", "c"] if alter.startswith("ADD") else ["a"])
    assert [a["name"] for a in details[after]["ps"]["of"]["attributes"]] == attributes
    assert records[after]["since_lsn"] is not None
    # row 1 was not written since the ALTER, yet its value changed: the table is read again
    env.wait_for("pairs", 5)
    reread = {orjson.dumps(e["key"]): e for e in env.values("pairs") if e["op"] == "r"}
    row = reread[orjson.dumps({"id": 1})]
    assert row["after"]["p"] == ({"a": 1, "b": 2, "c": None} if alter.startswith("ADD")
                                 else {"a": 1})
    assert row["schema_version"] == after


def test_a_table_dropped_and_created_again_starts_empty(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    env.sql("CREATE TABLE t (id int PRIMARY KEY, v text)",
            "INSERT INTO t VALUES (1, 'snapshot')")
    run_capture()
    env.sql("INSERT INTO t VALUES (2, 'old'), (3, 'old')")
    env.sql("ALTER TABLE t RENAME TO t_tmp", "ALTER TABLE t_tmp RENAME TO t")  # same relation
    env.sql("INSERT INTO t VALUES (4, 'old')")
    env.sql("DROP TABLE t")
    env.sql("CREATE TABLE t (id int PRIMARY KEY, v text)")
    env.sql("INSERT INTO t VALUES (3, 'new'), (5, 'new')")
    env.wait_for("t", 7)
    events = env.values("t")
    assert [e["op"] for e in events] == ["r", "c", "c", "c", "t", "c", "c"]
    assert events[4]["truncate"]["recreated"] is True
    assert sorted(_replayed(events).values(), key=lambda row: row["id"]) == [
        {"id": 3, "v": "new"}, {"id": 5, "v": "new"}]


def test_two_tables_on_one_topic_stop_the_start_naming_both(capture_env: CaptureEnv) -> None:
    env = capture_env
    env.sql('CREATE TABLE "a b" (id int PRIMARY KEY)', "CREATE TABLE a_x20_b (id int PRIMARY KEY)")
    log = FileLog(env.log_dir)
    try:
        with pytest.raises(ConfigError) as raised:
            Capture(env.config, log).run(threading.Event())
    finally:
        log.close()
    message = str(raised.value)
    assert '"public"."a b"' in message and '"public"."a_x20_b"' in message
    assert "log.topic_names" in message
    with psycopg.connect(env.dsn) as conn:  # refused before the slot was created
        assert conn.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s",
                            (env.slot,)).fetchone() == (0,)


def test_doctor_lists_escaped_topics_and_refuses_kafka_collisions(
        capture_env: CaptureEnv) -> None:
    env = capture_env
    env.sql('CREATE SCHEMA "Sales Dept"',
            'CREATE TABLE "Sales Dept"."Order Items" (id int PRIMARY KEY)',
            "CREATE TABLE plain (id int PRIMARY KEY)",
            f"CREATE PUBLICATION {env.slot} FOR ALL TABLES")
    with psycopg.connect(env.dsn) as conn:
        findings = topic_findings(conn, env.config)
    assert [(f.level, f.check) for f in findings] == [("ok", "topic Sales Dept.Order Items")]
    assert f"{env.slot}.Sales_x20_Dept.Order_x20_Items" in findings[0].detail
    env.sql("CREATE SCHEMA a_b", "CREATE TABLE a_b.c (id int PRIMARY KEY)",
            "CREATE SCHEMA a", "CREATE TABLE a.b_c (id int PRIMARY KEY)")
    with psycopg.connect(env.dsn) as conn:
        findings = topic_findings(conn, env.config)
    assert [f.level for f in findings] == ["error"], findings
    assert '"a"."b_c"' in findings[0].detail and '"a_b"."c"' in findings[0].detail
    assert "Kafka" in findings[0].detail
