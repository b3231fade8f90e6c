"""Prepared transactions on PostgreSQL 15 and 17, with the slot's two-phase decoding on
(``source.two_phase``) and off: COMMIT PREPARED gives the events exactly once, at the
commit; ROLLBACK PREPARED gives nothing; a capture killed (-9) between PREPARE and COMMIT
PREPARED gives them exactly once after its restart."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from compose.launcher import PostgresServer
from tests.integration.fidelity.conftest import MakeScenario
from tests.integration.fidelity.scenario import Scenario

from .conftest import SETTINGS
from .test_smoke import streamed_transactions

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=[15, 17], ids=lambda major: f"pg{major}")
def server_major(request: pytest.FixtureRequest) -> int:
    """The versions with two-phase decoding: protocol 3 (15) and 4 (17)."""
    return int(request.param)


@pytest.fixture(scope="module")
def postgres_dsn(server_major: int) -> Iterator[str]:
    """A server with ``max_prepared_transactions`` (``SETTINGS``) of that version."""
    with PostgresServer(version=server_major, settings=SETTINGS) as server:
        yield server.dsn()


def _config(scenario: Scenario, two_phase: bool) -> Path:
    path = scenario.workdir / "pipeline.yaml"
    path.write_text(f"""
source:
  dsn: {scenario.dsn}
  slot: {scenario.name}
  publication: {scenario.name}
  heartbeat_interval: 1s
  two_phase: {str(two_phase).lower()}
log:
  backend: file
  path: {scenario.log_dir}
  partitions: 2
""")
    return path


def _start(scenario: Scenario, config: Path) -> subprocess.Popen[bytes]:
    """``cdc capture`` in its own process (so it can be killed -9); returns once it
    streams from the slot."""
    process = subprocess.Popen([sys.executable, "-m", "cdc.cli", "capture", "-c", str(config)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    with psycopg.connect(scenario.dsn, autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT active_pid FROM pg_replication_slots "
                               "WHERE slot_name = %s", (scenario.name,)).fetchone()
            if row is not None and row[0] is not None:
                return process
            assert process.poll() is None, "the capture stopped while starting"
            assert time.monotonic() < deadline, "the capture did not start streaming"
            time.sleep(0.1)


def _prepare(scenario: Scenario, gid: str, *ids: int) -> None:
    with psycopg.connect(scenario.dsn, autocommit=True) as conn:
        conn.execute("BEGIN")
        for row_id in ids:
            conn.execute("INSERT INTO items VALUES (%s, %s)", (row_id, gid))
        conn.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))


def _finish(scenario: Scenario, statement: str) -> None:
    """COMMIT PREPARED / ROLLBACK PREPARED (not inside a transaction block)."""
    with psycopg.connect(scenario.dsn, autocommit=True) as conn:
        conn.execute(statement.encode())


def _ids(events: list[dict[str, Any]]) -> Counter[int]:
    return Counter(e["after"]["id"] for e in events if e["op"] == "c")


def _wait_ids(scenario: Scenario, *ids: int) -> list[dict[str, Any]]:
    return scenario.wait_for("public", "items", lambda found: set(ids) <= set(_ids(found)),
                             timeout=60)


def _slot(scenario: Scenario) -> tuple[bool, int]:
    """The slot's ``two_phase`` and ``confirmed_flush_lsn`` (as a number)."""
    with psycopg.connect(scenario.dsn, autocommit=True) as conn:
        row = conn.execute("SELECT two_phase, confirmed_flush_lsn - '0/0'::pg_lsn "
                           "FROM pg_replication_slots WHERE slot_name = %s",
                           (scenario.name,)).fetchone()
    assert row is not None
    return bool(row[0]), int(row[1])


def _wal_lsn(scenario: Scenario) -> int:
    with psycopg.connect(scenario.dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("two_phase", [True, False], ids=["two_phase", "default"])
def test_prepared_transactions_exactly_once_across_a_kill(make_scenario: MakeScenario,
                                                          two_phase: bool) -> None:
    scenario = make_scenario(types=False)
    scenario.sql("CREATE TABLE items (id int PRIMARY KEY, note text)")
    config = _config(scenario, two_phase)
    capture = _start(scenario, config)
    try:
        assert _slot(scenario)[0] is two_phase

        # PREPARE, a transaction after it, then COMMIT PREPARED: once, at the commit
        _prepare(scenario, "a", 1, 2, 3)
        after_prepare = _wal_lsn(scenario)
        scenario.sql("INSERT INTO items VALUES (10, 'plain')")
        events = _wait_ids(scenario, 10)
        assert not {1, 2, 3} & set(_ids(events)), "nothing before COMMIT PREPARED"
        if two_phase:  # never acknowledged past the pending PREPARE
            time.sleep(1.5)  # a negative check: an acknowledgement would have come by now
            assert _slot(scenario)[1] <= after_prepare
        _finish(scenario, "COMMIT PREPARED 'a'")
        events = _wait_ids(scenario, 1, 2, 3)
        prepared = [e for e in events if e["after"]["id"] in (1, 2, 3)]
        plain = next(e for e in events if e["after"]["id"] == 10)
        assert len({e["source"]["commit_lsn"] for e in prepared}) == 1
        assert [e["source"]["seq"] for e in prepared] == [0, 1, 2]
        assert prepared[0]["source"]["commit_lsn"] != plain["source"]["commit_lsn"]
        assert events.index(prepared[0]) > events.index(plain), "at the commit, after 10"

        # PREPARE then ROLLBACK PREPARED: nothing
        _prepare(scenario, "b", 4)
        _finish(scenario, "ROLLBACK PREPARED 'b'")
        scenario.sql("INSERT INTO items VALUES (11, 'plain')")
        _wait_ids(scenario, 11)

        # a large one (past logical_decoding_work_mem): streamed, then Stream Prepare
        with psycopg.connect(scenario.dsn, autocommit=True) as conn:
            conn.execute("BEGIN")
            conn.execute("INSERT INTO items SELECT n, 'big' FROM generate_series(1000, 3999) n")
            conn.execute("PREPARE TRANSACTION 'big'")
        _finish(scenario, "COMMIT PREPARED 'big'")
        events = _wait_ids(scenario, *range(1000, 4000))
        assert len({e["source"]["commit_lsn"] for e in events if e["after"]["id"] >= 1000}) == 1
        assert streamed_transactions(scenario.dsn, scenario.name) > 0

        # kill -9 between PREPARE and COMMIT PREPARED (one committed while it is down, one
        # after its restart)
        _prepare(scenario, "c", 5, 6)
        _prepare(scenario, "d", 7)
        scenario.sql("INSERT INTO items VALUES (12, 'plain')")
        _wait_ids(scenario, 12)
        capture.send_signal(signal.SIGKILL)
        capture.wait(timeout=30)
        _finish(scenario, "COMMIT PREPARED 'c'")
        scenario.sql("INSERT INTO items VALUES (13, 'plain')")
        capture = _start(scenario, config)
        _wait_ids(scenario, 5, 6, 13)
        _finish(scenario, "COMMIT PREPARED 'd'")
        scenario.sql("INSERT INTO items VALUES (14, 'plain')")
        events = _wait_ids(scenario, 7, 14)
        time.sleep(1.0)  # anything duplicated would have come by now
        counts = _ids(scenario.events("public", "items"))
        once = [1, 2, 3, 5, 6, 7, 10, 11, 12, 13, 14, *range(1000, 4000)]
        assert counts == Counter(dict.fromkeys(once, 1)), counts - Counter(once)
    finally:
        capture.send_signal(signal.SIGTERM)
        try:
            capture.wait(timeout=30)
        except subprocess.TimeoutExpired:
            capture.kill()
            capture.wait()
        with psycopg.connect(scenario.dsn, autocommit=True) as conn:  # DROP DATABASE needs
            for (gid,) in conn.execute("SELECT gid FROM pg_prepared_xacts "
                                       "WHERE database = current_database()").fetchall():
                conn.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
