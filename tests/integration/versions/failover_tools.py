"""What the failover and standby tests share: waiting, querying, a steady insert workload,
a capture process, and the log read back in order (one partition: commit order)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import psycopg

from cdc.log.file import FileLog

__all__ = ["CaptureProcess", "Workload", "logged_events", "query", "wait"]


def wait(what: str, done: Callable[[], bool], timeout: float = 90) -> None:
    """Poll ``done`` until it is true; fail the test naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def query(dsn: str, text: str) -> list[tuple[Any, ...]]:
    """Run one statement (autocommit); its rows, if it returns any."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
        cursor = conn.execute(text.encode())
        return cursor.fetchall() if cursor.description else []


def logged_events(log_dir: Path, table: str = "items") -> list[dict[str, Any]]:
    """The events of ``public.<table>`` in log order (the tests use one partition)."""
    if not log_dir.exists():
        return []
    event_log = FileLog(log_dir)
    events: list[dict[str, Any]] = []
    try:
        for topic in event_log.admin().topics():
            if topic.endswith(f".public.{table}"):
                events.extend(orjson.loads(m.value) for m in event_log.read_to_end(topic))
    finally:
        event_log.close()
    return events


class Workload(threading.Thread):
    """One row per transaction, ids ascending; after an error it reconnects (the
    multi-host DSN finds the primary) and retries the same id (ON CONFLICT: it may have
    committed)."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.next_id = 1
        self.stopping = threading.Event()

    def run(self) -> None:
        conn: psycopg.Connection[tuple[object, ...]] | None = None
        while not self.stopping.is_set():
            try:
                if conn is None:
                    conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=2)
                conn.execute("INSERT INTO items VALUES (%s, 'w') ON CONFLICT DO NOTHING",
                             (self.next_id,))
                self.next_id += 1
                time.sleep(0.01)
            except psycopg.Error:
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.2)
        if conn is not None:
            conn.close()

    def finish(self) -> None:
        """Stop inserting and wait for the thread."""
        self.stopping.set()
        self.join(timeout=30)


class CaptureProcess:
    """``cdc capture -c config [flags]`` in a child process, stderr to ``<name>.stderr``
    beside the config."""

    def __init__(self, config: Path, name: str, *flags: str) -> None:
        self.stderr_path = config.with_name(f"{name}.stderr")
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", "capture", "-c",
                                      str(config), *flags], stdout=subprocess.DEVNULL,
                                     stderr=self._stderr)

    @property
    def stderr(self) -> str:
        """What the capture wrote to stderr so far."""
        return self.stderr_path.read_text(errors="replace")

    def exit_code(self, timeout: float) -> int:
        """Wait for the capture to exit by itself; its exit status."""
        return self.proc.wait(timeout=timeout)

    def stop(self) -> str:
        """SIGTERM (then kill after 30 s); its stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()
        return self.stderr
