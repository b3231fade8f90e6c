"""PostgreSQL 13: pgoutput sends no logical decoding messages, so what is built on them
stops with an error naming the version and the alternative instead of waiting for
messages that never come (README, "PostgreSQL versions and high availability"); an
interrupted initial snapshot is taken again on a new slot. The module starts its own
PostgreSQL 13, whatever version the rest of the run uses (``make test`` runs it too)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import orjson
import psycopg
import pytest
from click.testing import CliRunner

from cdc.capture.runner import Capture, CaptureSettings
from cdc.capture.source.messages import MessagesUnsupportedError, sends_messages
from cdc.cli import main
from compose.launcher import PostgresServer

from .conftest import FREQUENT_CHECKS, CaptureEnv, server_version
from .snapshot_check import CaptureThread, settle, use_config, wait_state


@pytest.fixture(scope="module")
def postgres_dsn() -> Iterator[str]:
    """PostgreSQL 13 for this module (``capture_env``'s database is made on it)."""
    with PostgresServer(version=13) as server:
        yield server.dsn()


@pytest.fixture(autouse=True)
def _on_13(capture_env: CaptureEnv) -> None:
    version = server_version(capture_env.dsn)
    assert not sends_messages(version), f"expected PostgreSQL 13, got {version}"


def _reads(env: CaptureEnv, table: str) -> list[int]:
    return sorted(orjson.loads(m.value)["key"]["id"] for m in env.events(table)
                  if orjson.loads(m.value)["op"] == "r")


def test_outbox_prefixes_stop_the_capture_naming_the_version(capture_env: CaptureEnv) -> None:
    env = capture_env
    env.sql("CREATE TABLE t (id int PRIMARY KEY)")
    use_config(env, messages_prefixes="[outbox]")
    log = env.open_log()
    try:
        with pytest.raises(MessagesUnsupportedError) as raised:
            Capture(env.config, log).run(threading.Event())  # not retried: it stops
    finally:
        log.close()
    text = str(raised.value)
    assert "source.messages_prefixes ['outbox']: PostgreSQL 13" in text
    assert "rows of a published table" in text and "PostgreSQL 14 or later" in text


def test_cdc_snapshot_and_ddl_install_are_refused(capture_env: CaptureEnv) -> None:
    env = capture_env
    env.sql("CREATE TABLE t (id int PRIMARY KEY)")
    config = str(env.config_path)
    for extra in ((), ("--cancel",)):
        result = CliRunner().invoke(main, ["snapshot", "-c", config, "--table", "public.t",
                                           *extra])
        assert result.exit_code == 1, result.output
        assert "--table public.t: PostgreSQL 13: incremental snapshots need" in result.output
        assert f"pg_drop_replication_slot('{env.slot}')" in result.output
        assert "--recreate-lost-slot" in result.output
    result = CliRunner().invoke(main, ["ddl", "install", "-c", config])
    assert result.exit_code == 1, result.output
    assert "cdc ddl install: PostgreSQL 13's pgoutput sends no logical decoding" in result.output
    with psycopg.connect(env.dsn) as conn:
        triggers = conn.execute("SELECT count(*) FROM pg_event_trigger").fetchone()
    assert triggers == (0,), "nothing installed"


def test_a_joining_table_fails_its_snapshot_and_a_new_slot_reads_it(
        capture_env: CaptureEnv) -> None:
    env = capture_env
    env.sql("CREATE TABLE first (id int PRIMARY KEY)",
            "CREATE TABLE marker (id bigint PRIMARY KEY)")
    use_config(env, tables="['public.*', '!public.skip_*']")  # new tables join by name
    with CaptureThread(env, FREQUENT_CHECKS):  # sync the publication often
        settle(env)
        env.sql("CREATE TABLE later (id int PRIMARY KEY, v text)",  # before it joins
                "INSERT INTO later SELECT g, 'before' FROM generate_series(1, 300) g")
        failed = wait_state(env, "public.later", "failed", timeout=30)  # at once: no wait
        env.sql("INSERT INTO later VALUES (1000, 'streamed')")  # the stream goes on
        assert [orjson.loads(m.value)["key"]["id"] for m in env.wait_for("later", 1)] == [1000]
    assert failed.reason is not None and failed.reason.startswith("PostgreSQL 13: ")
    assert _reads(env, "later") == [], "no chunk was read"

    # the documented way out: drop the slot, start with --recreate-lost-slot
    with psycopg.connect(env.dsn, autocommit=True) as conn:
        deadline = time.monotonic() + 30
        while conn.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                           (env.slot,)).fetchone() == (True,):
            assert time.monotonic() < deadline, "the stopped capture's slot stayed active"
            time.sleep(0.1)
        conn.execute("SELECT pg_drop_replication_slot(%s)", (env.slot,))
    with CaptureThread(env, CaptureSettings(batch_delay_s=0.01, recreate_lost_slot=True)):
        settle(env)
    events = [orjson.loads(m.value) for m in env.events("later")]
    assert [e["op"] for e in events[:2]] == ["c", "t"], "a truncate before the new snapshot"
    assert _reads(env, "later") == [*range(1, 301), 1000]


def test_snapshot_mode_always_on_an_existing_slot_fails_instead_of_waiting(
        capture_env: CaptureEnv) -> None:
    env = capture_env
    env.sql("CREATE TABLE kept (id int PRIMARY KEY)", "CREATE TABLE marker (id bigint "
            "PRIMARY KEY)", "INSERT INTO kept SELECT generate_series(1, 50)")
    use_config(env, snapshot="always")
    with CaptureThread(env, CaptureSettings(batch_delay_s=0.01)):
        assert len(env.wait_for("kept", 50)) == 50  # the new slot's initial snapshot
    with CaptureThread(env, CaptureSettings(batch_delay_s=0.01)):
        failed = wait_state(env, "public.kept", "failed", timeout=30)
        env.sql("INSERT INTO kept VALUES (51)")
        assert len(env.wait_for("kept", 51)) == 51, "streaming goes on"
    assert failed.reason is not None and "--recreate-lost-slot" in failed.reason
    assert _reads(env, "kept") == list(range(1, 51)), "read once, by the initial snapshot"
