"""A fresh database, pipeline file and log per capture test; a capture thread runner."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest

from cdc.capture.runner import Capture, CaptureSettings
from cdc.capture.source.messages import sends_messages
from cdc.config import PipelineConfig, load_config
from cdc.log import Log, Message
from cdc.log.open import open_log


@dataclass
class CaptureEnv:
    """One test's database, config file and log directory."""

    dsn: str
    config_path: Path
    log_dir: Path
    slot: str

    @property
    def config(self) -> PipelineConfig:
        return load_config(self.config_path)

    def sql(self, *statements: str) -> None:
        """Run statements in one transaction."""
        with psycopg.connect(self.dsn) as conn:
            for statement in statements:
                conn.execute(statement.encode())

    def topic(self, table: str) -> str:
        if table == "messages":
            return f"{self.slot}.messages"
        return f"{self.slot}.public.{table}"

    def open_log(self) -> Log:
        """The log the test's pipeline file names (file or Kafka); the caller closes it."""
        return open_log(self.config.log)

    def events(self, table: str) -> list[Message]:
        """Every record of a table's topic up to its end offsets, in commit order."""
        log = self.open_log()
        try:
            if self.topic(table) not in log.admin().topics():
                return []
            return sorted(log.read_to_end(self.topic(table)), key=lambda m: m.position)
        finally:
            log.close()

    def values(self, table: str) -> list[dict[str, Any]]:
        """The decoded events of a table, in commit order."""
        return [orjson.loads(m.value) for m in self.events(table)]

    def wait_for(self, table: str, count: int, timeout: float = 60.0) -> list[Message]:
        """Wait until the table's topic holds at least ``count`` records."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.events(table)
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.2)


def server_version(dsn: str) -> int:
    """The server's ``server_version_num`` (e.g. 130022)."""
    with psycopg.connect(dsn) as conn:
        return conn.info.server_version


def require_messages(dsn: str, feature: str) -> None:
    """Skip on a server whose pgoutput sends no logical decoding messages (13), where the
    README's version table says ``feature`` is not available."""
    version = server_version(dsn)
    if not sends_messages(version):
        pytest.skip(f"PostgreSQL {version // 10000}: pgoutput sends no logical decoding "
                    f"messages (14+), so {feature} is not available there (README, "
                    "\"PostgreSQL versions and high availability\"); "
                    "tests/integration/capture/test_pg13_without_messages.py checks the "
                    "error it stops with instead")


@pytest.fixture
def capture_env(fresh_database: str, unique_name: str, tmp_path: Path) -> CaptureEnv:
    dsn = fresh_database
    # outbox messages: from PostgreSQL 14 (13 refuses source.messages_prefixes)
    messages = "  messages_prefixes: [outbox]\n" if sends_messages(server_version(dsn)) else ""
    config_path = tmp_path / "pipeline.yaml"
    config_path.write_text(f"""
source:
  dsn: {dsn}
  slot: {unique_name}
  publication: {unique_name}
  heartbeat_interval: 1s
{messages}log:
  backend: file
  path: {tmp_path / 'log'}
  partitions: 3
""")
    return CaptureEnv(dsn, config_path, tmp_path / "log", unique_name)


# the periodic checks (publication sync, slot health, new tables) every half second
FREQUENT_CHECKS = CaptureSettings(batch_delay_s=0.01, source_check_s=0.5,
                                  new_tables_check_s=0.5)


@pytest.fixture
def run_capture(capture_env: CaptureEnv) -> Iterator[Callable[..., Capture]]:
    """``start(settings=None)``: start the capture in a thread (stopped at the end of the
    test); ``settings`` default to ``CaptureSettings(batch_delay_s=0.01)``."""
    started: list[tuple[threading.Thread, threading.Event, Capture, Log]] = []

    def start(settings: CaptureSettings | None = None) -> Capture:
        log = capture_env.open_log()
        capture = Capture(capture_env.config, log,
                          settings or CaptureSettings(batch_delay_s=0.01))
        stop = threading.Event()
        thread = threading.Thread(target=capture.run, args=(stop,), daemon=True)
        thread.start()
        started.append((thread, stop, capture, log))
        deadline = time.monotonic() + 30
        while capture.stats.sessions == 0 or not _slot_active(capture_env):
            assert time.monotonic() < deadline, "the capture did not start streaming"
            time.sleep(0.05)
        return capture

    yield start
    for thread, stop, _, log in started:
        stop.set()
        thread.join(timeout=30)
        log.close()


def _slot_active(env: CaptureEnv) -> bool:
    with psycopg.connect(env.dsn) as conn:
        row = conn.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                           (env.slot,)).fetchone()
    return bool(row and row[0])
