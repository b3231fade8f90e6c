"""``cdc event-schema`` describes what the capture really writes: every kind of event a
real capture of real PostgreSQL produced validates against it (jsonschema)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import jsonschema
from click.testing import CliRunner

from cdc.capture.runner import Capture
from cdc.capture.schema.event_schema import EVENT_JSON_SCHEMA
from cdc.capture.source.messages import sends_messages
from cdc.cli import main

from .conftest import CaptureEnv, server_version
from .test_capture_fidelity import _topic_values


def _printed_schema() -> dict[str, Any]:
    result = CliRunner().invoke(main, ["event-schema"])
    assert result.exit_code == 0, result.output
    schema: dict[str, Any] = json.loads(result.output)
    return schema


def _capture_every_kind_of_event(env: CaptureEnv, run_capture: Callable[[], Capture],
                                 messages: bool) -> list[dict[str, Any]]:
    """Every kind of event; with ``messages`` (PostgreSQL 14+) also outbox messages, DDL
    records and the truncate events of dropped tables (13 has none of them)."""
    if messages:
        assert CliRunner().invoke(main, ["ddl", "install", "-c",
                                         str(env.config_path)]).exit_code == 0
    env.sql("CREATE TABLE t (id int PRIMARY KEY, v text, body text)",
            "ALTER TABLE t REPLICA IDENTITY FULL",
            "ALTER TABLE t ALTER COLUMN body SET STORAGE EXTERNAL",
            "INSERT INTO t SELECT 1, 'snapshot', string_agg(md5(g::text), '') "
            "FROM generate_series(1, 300) g",
            "CREATE TABLE d (id int PRIMARY KEY)", "INSERT INTO d VALUES (1)")
    run_capture()
    env.sql("INSERT INTO t VALUES (2, 'new', NULL)",
            "UPDATE t SET v = 'toast unchanged' WHERE id = 1",
            "UPDATE t SET id = 3 WHERE id = 2",  # a key change: d then c
            "DELETE FROM t WHERE id = 3")
    # a row read after its type changed is kept as text, "unparsed": all in one
    # transaction, so the capture cannot have read the type before the change
    env.sql("CREATE TYPE pair AS (a int, b int)",
            "CREATE TABLE pairs (id int PRIMARY KEY, p pair)",
            "INSERT INTO pairs VALUES (1, ROW(1, 2))",
            "ALTER TYPE pair ADD ATTRIBUTE c int CASCADE")
    if messages:
        env.sql("SELECT pg_logical_emit_message(true, 'outbox', '{\"order\": 1}')",
                "SELECT pg_logical_emit_message(false, 'outbox', 'not json')")
    env.sql("TRUNCATE d")
    env.sql("INSERT INTO d VALUES (2)")
    env.sql("DROP TABLE d", "CREATE TABLE d (id int PRIMARY KEY)", "INSERT INTO d VALUES (3)")
    env.sql("DROP TABLE d")
    # r t c, then (dropped) recreated c, then (dropped): the drops only with messages
    env.wait_for("d", 7 if messages else 5)
    events = []
    for topic in ("public.t", "public.pairs", "public.d",
                  *(("messages", "_ddl") if messages else ())):
        events += _topic_values(env, f"{env.slot}.{topic}", 1)
    return events


def test_every_captured_event_validates_against_the_printed_schema(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture]) -> None:
    schema = _printed_schema()
    assert schema == json.loads(json.dumps(EVENT_JSON_SCHEMA))
    validator = jsonschema.Draft202012Validator(schema)
    validator.check_schema(schema)
    messages = sends_messages(server_version(capture_env.dsn))
    events = _capture_every_kind_of_event(capture_env, run_capture, messages)
    for event in events:
        errors = [error.message for error in validator.iter_errors(event)]
        assert not errors, (event, errors)
    assert {e["op"] for e in events} == {"r", "c", "u", "d", "t", *("m" * messages)}
    assert any(e.get("unparsed") == ["p"] for e in events)
    assert any(e["unchanged"] == ["body"] for e in events)
    assert any(e["op"] == "u" and e["before"] is not None for e in events)
    flags = [tuple(sorted(e["truncate"])) for e in events if e["op"] == "t"]
    assert ("cascade", "restart_identity") in flags
    assert (("cascade", "dropped", "restart_identity") in flags) is messages
    assert ("cascade", "recreated", "restart_identity") in flags
    assert any(e["op"] == "m" and not e["message"]["transactional"]
               for e in events) is messages

    # the schema can say no: what the capture never writes does not validate
    update = next(e for e in events if e["op"] == "u")
    for broken in _broken_copies(update):
        assert not validator.is_valid(broken), broken


def _broken_copies(event: dict[str, Any]) -> list[dict[str, Any]]:
    copies = [copy.deepcopy(event) for _ in range(9)]
    copies[0]["op"] = "x"
    del copies[1]["source"]["commit_lsn"]
    copies[2]["source"]["lsn"] = "16B3748"
    copies[3]["unchanged"] = "body"
    copies[4]["schema_version"] = 0
    copies[5]["undocumented"] = 1
    copies[6]["op"] = "t"  # a truncate without its "truncate" block
    copies[7]["after"] = None  # an update without its new row
    copies[8]["source"]["snapshot"] = "no"
    return copies
