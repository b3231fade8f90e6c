"""``source.failover_slot`` on real servers: PostgreSQL 17 creates the slot with
``failover = true`` (or alters an existing one), 15 refuses the setting at start-up; ``cdc
doctor``'s failover checks."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from cdc.capture.doctor import failover_findings
from cdc.capture.source.slot import ensure_slot, slot_failover
from cdc.config import PipelineConfig
from cdc.errors import SourceError
from compose.launcher import PostgresServer
from tests.integration.connectors.harness import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pg17() -> Iterator[PostgresServer]:
    with PostgresServer(version=17) as server:
        yield server


def _config(dsn: str, slot: str) -> PipelineConfig:
    return PipelineConfig.model_validate({
        "source": {"dsn": dsn, "slot": slot, "publication": "p", "failover_slot": True},
        "log": {"backend": "file", "path": "/tmp/unused-log"}})


def _failover(dsn: str, slot: str) -> bool | None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return slot_failover(conn, slot)


def _wait_for_setting(dsn: str, name: str, value: str) -> None:
    """Until a new session sees ``name = value`` (after ``pg_reload_conf()``, which only
    signals the server to reload)."""
    def seen() -> bool:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SELECT current_setting(%s)", (name,)).fetchone()
        return row is not None and row[0] == value

    wait_until(seen, timeout=30, what=f"new sessions see {name} = {value!r}", interval=0.1)


def test_new_slot_is_a_failover_slot_on_17(pg17: PostgresServer) -> None:
    dsn = pg17.dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:
        ensure_slot(conn, dsn, "fo_new", failover=True, two_phase=True)
        row = conn.execute("SELECT failover, two_phase FROM pg_replication_slots"
                           " WHERE slot_name = 'fo_new'").fetchone()
    assert row == (True, True)


def test_existing_slot_without_failover_is_altered(pg17: PostgresServer) -> None:
    dsn = pg17.dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_create_logical_replication_slot('fo_old', 'pgoutput')")
        assert slot_failover(conn, "fo_old") is False
        ensure_slot(conn, dsn, "fo_old", failover=True)
    assert _failover(dsn, "fo_old") is True


def test_failover_refused_on_15_naming_version_and_setting() -> None:
    with PostgresServer(version=15) as server, \
            psycopg.connect(server.dsn(), autocommit=True) as conn:
        with pytest.raises(SourceError, match=r"source\.failover_slot.*PostgreSQL 15"):
            ensure_slot(conn, server.dsn(), "fo15", failover=True)
        assert conn.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,)
        findings = failover_findings(conn, _config(server.dsn(), "fo15"))
    assert [(f.level, f.check) for f in findings] == [("error", "failover")]
    assert "PostgreSQL 17" in findings[0].detail


def test_doctor_failover_checks_on_17(pg17: PostgresServer) -> None:
    dsn = pg17.dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_create_physical_replication_slot('standby1')")
        conn.execute("SELECT pg_create_logical_replication_slot('fo_doc', 'pgoutput')")
        findings = {f.check: f for f in failover_findings(conn, _config(dsn, "fo_doc"))}
        assert findings["failover slot"].level == "warn"
        assert findings["synchronized_standby_slots"].level == "warn"
        assert "synchronized_standby_slots = 'standby1'" in \
            findings["synchronized_standby_slots"].fix
        assert "sync_replication_slots = on" in findings["standby settings"].fix
        conn.execute("ALTER SYSTEM SET synchronized_standby_slots = 'standby1'")
        conn.execute("SELECT pg_reload_conf()")
        ensure_slot(conn, dsn, "fo_doc", failover=True)
    _wait_for_setting(dsn, "synchronized_standby_slots", "standby1")
    with psycopg.connect(dsn, autocommit=True) as conn:
        findings = {f.check: f for f in failover_findings(conn, _config(dsn, "fo_doc"))}
        assert findings["failover slot"].level == "ok"
        assert findings["synchronized_standby_slots"].level == "ok"
        conn.execute("ALTER SYSTEM RESET synchronized_standby_slots")
        conn.execute("SELECT pg_reload_conf()")
    _wait_for_setting(dsn, "synchronized_standby_slots", "")  # as the next test expects
