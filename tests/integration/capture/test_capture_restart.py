"""A real PostgreSQL restart mid-stream: the capture reconnects and resumes from the slot."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import orjson
import psycopg

from cdc.capture.runner import Capture, CaptureSettings
from cdc.config import load_config
from cdc.log import StartAt
from cdc.log.file import FileLog
from compose.launcher import PostgresServer


def logged_ids(log_dir: Path, topic: str) -> list[int]:
    log = FileLog(log_dir)
    if topic not in log.admin().topics():
        return []
    consumer = log.consumer(f"check-{time.monotonic_ns()}", topics=[topic],
                            start=StartAt.earliest())
    ids: list[int] = []
    try:
        while batch := consumer.poll(10_000, timeout=0.3):
            ids.extend(orjson.loads(m.key)["id"] for m in batch)
    finally:
        consumer.close()
    return ids


def test_capture_survives_a_postgres_restart(tmp_path: Path) -> None:
    with PostgresServer() as server:
        dsn = server.dsn()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
        config = tmp_path / "pipeline.yaml"
        config.write_text(f"source:\n  dsn: {dsn}\n  slot: restart\n  publication: restart\n"
                          f"log:\n  backend: file\n  path: {tmp_path / 'log'}\n")
        log = FileLog(tmp_path / "log")
        capture = Capture(load_config(config), log,
                          CaptureSettings(batch_delay_s=0.01, backoff_initial_s=0.2))
        stop = threading.Event()
        thread = threading.Thread(target=capture.run, args=(stop,), daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while capture.stats.sessions == 0:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(0.5)
            writer = psycopg.connect(dsn, autocommit=True)
            writer.execute("INSERT INTO t SELECT generate_series(1, 500)")
            writer.close()
            server.restart("fast")  # mid-stream: the capture may still be appending
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("INSERT INTO t SELECT generate_series(501, 1000)")
            deadline = time.monotonic() + 60
            while len(ids := logged_ids(tmp_path / "log", "restart.public.t")) < 1000:
                assert time.monotonic() < deadline, f"only {len(ids)} of 1000 events"
                time.sleep(0.3)
            assert sorted(ids) == list(range(1, 1001)), "no loss, no duplicate"
            assert capture.stats.sessions >= 2, "it reconnected"
        finally:
            stop.set()
            thread.join(timeout=30)
            log.close()
