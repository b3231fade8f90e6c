"""Capture replicas on a three-broker Kafka cluster: two ``cdc capture`` processes of one
pipeline, one streams and the other stands by. The streaming one is stalled (SIGSTOP):
the standby terminates its silent walsender and streams within
``capture.takeover_after``; woken up, the stalled one writes nothing (its producer is
fenced) and stands by. Then the new one is killed (SIGKILL) and the first takes over
again; then a broker is killed and started again (the capture goes on), then two (the
capture acknowledges nothing to PostgreSQL until they are back). The log ends with
every committed row exactly once, positions unique; a second capture on a file log
refuses in one line.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest

from cdc.config import load_config
from cdc.log.open import open_log
from tests.processes import start_cdc, stop_process

pytestmark = pytest.mark.integration

TAKEOVER_S = 3


class Writer:
    """Inserts one row per transaction until stopped; knows which ids committed."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.committed: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            next_id = 1
            while not self.stop.is_set():
                conn.execute("INSERT INTO t VALUES (%s, 'x')", (next_id,))
                self.committed.append(next_id)
                next_id += 1
                time.sleep(0.005)

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def wait_for(check: Callable[[], bool], what: str, timeout: float = 60) -> float:
    """Seconds until ``check()`` held; fails after ``timeout``."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, what
        time.sleep(0.1)
    return time.monotonic() - started


def said(stderr: Path, text: str) -> int:
    return stderr.read_text(errors="replace").count(text)


def source_yaml(dsn: str, name: str) -> str:
    return f"""
source:
  dsn: {dsn}
  slot: {name}
  publication: {name}
"""


@pytest.fixture
def replicas(fresh_database: str, unique_name: str, tmp_path: Path,
             kafka_cluster: Any) -> Iterator[tuple[Path, list[subprocess.Popen[bytes]]]]:
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, note text)")
    config = tmp_path / "pipeline.yaml"
    config.write_text(source_yaml(fresh_database, unique_name) + f"""  tables: [public.t]
  heartbeat_interval: 1s
log:
  backend: kafka
  bootstrap_servers: [{kafka_cluster.bootstrap_servers}]
  partitions: 2
capture:
  takeover_after: {TAKEOVER_S}s
""")
    processes: list[subprocess.Popen[bytes]] = []
    yield config, processes
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            stop_process(process)


def test_a_standby_takes_over_a_stalled_and_a_killed_capture_exactly_once(
        replicas: tuple[Path, list[subprocess.Popen[bytes]]], fresh_database: str,
        tmp_path: Path, kafka_cluster: Any) -> None:
    config, processes = replicas
    errs = [tmp_path / "a.log", tmp_path / "b.log"]
    first = start_cdc("capture", config, errs[0])
    processes.append(first)
    wait_for(lambda: slot_streamed(fresh_database, config), "the first capture never streamed")
    second = start_cdc("capture", config, errs[1])
    processes.append(second)
    wait_for(lambda: said(errs[1], "standing by") >= 1, "the second did not stand by")
    with Writer(fresh_database) as writer:
        wait_for(lambda: len(writer.committed) > 100, "no writes")
        first.send_signal(signal.SIGSTOP)
        took = wait_for(lambda: said(errs[1], "took over slot") >= 1,
                        "the standby did not take over the stalled capture")
        assert took < TAKEOVER_S + 30, took  # brokers and other suites share two cores
        first.send_signal(signal.SIGCONT)
        wait_for(lambda: said(errs[0], "standing by") >= 1,
                 "the stalled capture did not stand by once awake")
        wait_for(lambda: len(writer.committed) > 400, "no writes")
        second.kill()
        wait_for(lambda: said(errs[0], "took over slot") >= 1,
                 "the first did not take over the killed one", timeout=TAKEOVER_S + 30)
        wait_for(lambda: len(writer.committed) > 600, "no writes")
        kafka_cluster.stop_node(3)  # a broker lost under load: two replicas stay in sync
        wait_for(lambda: len(writer.committed) > 800, "no writes")
        kafka_cluster.start_node(3)
        wait_for(lambda: logged_count(config) >= 800, "the capture did not go on")
        kafka_cluster.stop_node(2)  # two lost: no write can reach its in-sync replicas
        kafka_cluster.stop_node(3)
        lost_at = wal_position(fresh_database)
        written = len(writer.committed)
        wait_for(lambda: len(writer.committed) > written + 300, "no writes")
        time.sleep(2)
        assert confirmed_flush(fresh_database, config) <= lost_at, \
            "acknowledged to PostgreSQL what Kafka could not hold"
        kafka_cluster.start_node(2)
        kafka_cluster.start_node(3)
    expected = sorted(writer.committed)
    wait_for(lambda: len(logged_rows(config)) >= len(expected),
             "the log never held every committed row")
    rows = logged_rows(config)
    ids = sorted(int(orjson.loads(value)["after"]["id"]) for value in rows.values())
    assert ids == expected, "every committed row once, nothing else"
    assert first.poll() is None, errs[0].read_text()[-3000:]


def slot_streamed(dsn: str, config: Path) -> bool:
    slot = load_config(config).source.slot
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_replication r JOIN "
                           "pg_replication_slots s ON s.active_pid = r.pid "
                           "WHERE s.slot_name = %s AND r.state = 'streaming'",
                           (slot,)).fetchone()
    return row is not None and row[0] == 1


def wal_position(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


def confirmed_flush(dsn: str, config: Path) -> int:
    slot = load_config(config).source.slot
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM "
                           "pg_replication_slots WHERE slot_name = %s", (slot,)).fetchone()
    assert row is not None
    return int(row[0])


def logged_count(config: Path) -> int:
    return len(logged_rows(config))


def logged_rows(config: Path) -> dict[tuple[int, int], bytes]:
    """Every committed record of the table's topic by position; a position written twice
    fails the test."""
    pipeline = load_config(config)
    event_log = open_log(pipeline.log)
    try:
        found: dict[tuple[int, int], bytes] = {}
        for message in event_log.read_to_end(pipeline.topic_for("public", "t")):
            position = (message.position.commit_lsn, message.position.seq)
            assert position not in found, f"position {position} written twice"
            found[position] = message.value
        return found
    finally:
        event_log.close()


def test_a_second_capture_on_a_file_log_refuses_in_one_line(
        fresh_database: str, unique_name: str, tmp_path: Path) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(source_yaml(fresh_database, unique_name) + f"""log:
  backend: file
  path: {tmp_path / "log"}
""")
    first = start_cdc("capture", config, tmp_path / "a.log")
    try:
        wait_for(lambda: slot_streamed(fresh_database, config), "the capture never streamed")
        second = subprocess.run([sys.executable, "-m", "cdc.cli", "capture", "-c", str(config)],
                                capture_output=True, text=True, timeout=120)
    finally:
        stop_process(first)
    assert second.returncode == 1
    assert "Traceback" not in second.stderr
    assert "another capture is writing to the log" in second.stderr
    assert "need the Kafka backend" in second.stderr

