"""A real PostgreSQL restart mid-stream: the capture reconnects and resumes from the slot."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import orjson
import psycopg
import pytest

from cdc.capture.runner import Capture, CaptureSettings
from cdc.capture.snapshot.incremental_log import read_records
from cdc.config import PipelineConfig, load_config
from cdc.log.open import open_log
from compose.launcher import PostgresServer
from tests.integration.connectors.harness import wait_until


def logged_ids(config: PipelineConfig, topic: str) -> list[int]:
    log = open_log(config.log)
    try:
        if topic not in log.admin().topics():
            return []
        return [orjson.loads(m.key)["id"] for m in log.read_to_end(topic)]
    finally:
        log.close()


def slot_active(dsn: str, slot: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                           (slot,)).fetchone()
    return bool(row and row[0])


@pytest.mark.parametrize("backend", ["file", "kafka"])
def test_capture_survives_a_postgres_restart(tmp_path: Path, backend: str,
                                             request: pytest.FixtureRequest) -> None:
    slot = f"restart_{backend}_{time.monotonic_ns() % 10**9}"
    log_section = (f"log:\n  backend: file\n  path: {tmp_path / 'log'}\n" if backend == "file"
                   else "log:\n  backend: kafka\n  bootstrap_servers: "
                        f"[{request.getfixturevalue('kafka_bootstrap')}]\n")
    with PostgresServer() as server:
        dsn = server.dsn()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
        config_path = tmp_path / "pipeline.yaml"
        config_path.write_text(f"source:\n  dsn: {dsn}\n  slot: {slot}\n"
                               f"  publication: {slot}\n{log_section}")
        config = load_config(config_path)
        log = open_log(config.log)
        capture = Capture(config, log, CaptureSettings(batch_delay_s=0.01,
                                                       backoff_initial_s=0.2))
        stop = threading.Event()
        thread = threading.Thread(target=capture.run, args=(stop,), daemon=True)
        thread.start()
        try:
            wait_until(lambda: capture.stats.sessions > 0 and slot_active(dsn, slot),
                       timeout=30, what="the capture streams from its slot", interval=0.05)
            writer = psycopg.connect(dsn, autocommit=True)
            writer.execute("INSERT INTO t SELECT generate_series(1, 500)")
            writer.close()
            server.restart("fast")  # mid-stream: the capture may still be appending
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("INSERT INTO t SELECT generate_series(501, 1000)")
            deadline = time.monotonic() + 60
            while len(ids := logged_ids(config, f"{slot}.public.t")) < 1000:
                assert time.monotonic() < deadline, f"only {len(ids)} of 1000 events"
                time.sleep(0.3)
            assert sorted(ids) == list(range(1, 1001)), "no loss, no duplicate"
            assert capture.stats.sessions >= 2, "it reconnected"
        finally:
            stop.set()
            thread.join(timeout=30)
            log.close()
    checked = open_log(config.log)
    try:
        records = read_records(checked, slot)
    finally:
        checked.close()
    started = [r for r in records if r.get("slot") == slot and r.get("state") == "started"]
    assert len(started) == 1, "the restart never dropped and re-created the slot"
