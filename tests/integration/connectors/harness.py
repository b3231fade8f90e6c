"""A capture and connectors in threads of the test process, on one file log.

``PipelineHarness`` is what ``cdc run`` does (one ``FileLog`` shared by the capture and
the connectors), with handles a test needs: stop and restart one connector with other
settings, rewind its group's offsets, read a topic, wait for a group to catch up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from cdc.capture.runner import Capture, CaptureSettings
from cdc.config import ConnectorConfig, PipelineConfig, load_config
from cdc.log import Message, StartAt
from cdc.log.file import FileLog
from cdc.log.file.offsets import OffsetStore
from connectors.runtime import ConnectorRunner, RuntimeMetrics


def wait_until(check: Callable[[], bool], *, timeout: float, what: str,
               interval: float = 0.3) -> None:
    """Poll ``check`` until it is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s: {what}"
        time.sleep(interval)


@dataclass
class PipelineHarness:
    """One test's database, pipeline file and log; capture and connectors in threads."""

    dsn: str
    config_path: Path
    log_dir: Path
    slot: str
    log: FileLog | None = None
    capture: Capture | None = None
    _stop_capture: threading.Event = field(default_factory=threading.Event)
    _capture_thread: threading.Thread | None = None
    metrics: RuntimeMetrics = field(default_factory=RuntimeMetrics)
    _runners: list[ConnectorRunner] = field(default_factory=list)

    @property
    def config(self) -> PipelineConfig:
        return load_config(self.config_path)

    def topic(self, table: str) -> str:
        return f"{self.config.topic_prefix}.public.{table}"

    def execute(self, *statements: str, params: tuple[Any, ...] = ()) -> None:
        """Run ``statements`` in one transaction (``params`` for the first)."""
        with psycopg.connect(self.dsn) as conn:
            for number, statement in enumerate(statements):
                conn.execute(statement.encode(), params if number == 0 else ())

    def connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        """A connection to the test's database (one transaction per ``with`` block)."""
        return psycopg.connect(self.dsn)

    def query(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn) as conn:
            return conn.execute(statement.encode(), params).fetchall()

    def _log(self) -> FileLog:
        if self.log is None:
            self.log = FileLog(self.log_dir)
        return self.log

    # -- capture -------------------------------------------------------------------
    def start_capture(self) -> Capture:
        """Start the capture in a thread; return once it streams."""
        capture = Capture(self.config, self._log(), CaptureSettings(batch_delay_s=0.01))
        self.capture = capture
        self._capture_thread = threading.Thread(target=capture.run, args=(self._stop_capture,),
                                                name="capture", daemon=True)
        self._capture_thread.start()
        wait_until(lambda: capture.stats.sessions > 0 and self._slot_active(), timeout=30,
                   what="the capture streams", interval=0.05)
        return capture

    def _slot_active(self) -> bool:
        rows = self.query("SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                          (self.slot,))
        return bool(rows and rows[0][0])

    # -- connectors ----------------------------------------------------------------
    def connector(self, name: str, **overrides: Any) -> ConnectorConfig:
        """The configured connector ``name``, with fields replaced by ``overrides``."""
        found = next(c for c in self.config.connectors if c.name == name)
        return found.model_copy(update=overrides)

    def start_connector(self, name: str, **overrides: Any) -> ConnectorRunner:
        """Start connector ``name`` (from its committed offsets) in threads."""
        runner = ConnectorRunner(self.connector(name, **overrides), self._log(),
                                 topic_prefix=self.config.topic_prefix, metrics=self.metrics)
        runner.start()
        self._runners.append(runner)
        return runner

    def stop_connector(self, runner: ConnectorRunner) -> None:
        """Drain ``runner``: finish, flush, commit; fail the test on a worker failure."""
        runner.stop()
        assert runner.join(timeout=60), f"connector {runner.group} did not stop"
        self._runners.remove(runner)
        runner.raise_failure()

    def counter(self, name: str, connector: str) -> float:
        """The value of the runtime's counter ``name`` (like ``retries``) of ``connector``."""
        value = self.metrics.registry.get_sample_value(
            f"distributary_connector_{name}_total", {"connector": connector})
        return value or 0.0

    @property
    def runners(self) -> list[ConnectorRunner]:
        """The connectors running now."""
        return list(self._runners)

    def rewind_group(self, group: str) -> int:
        """Set every committed offset of ``group`` to 0 (its connector must be stopped);
        the number of partitions rewound."""
        offsets = OffsetStore(self.log_dir, group)
        partitions = list(offsets.all())
        offsets.put_many(dict.fromkeys(partitions, 0))
        return len(partitions)

    def caught_up(self, group: str, topic: str) -> bool:
        """True when ``group`` committed everything the log holds of ``topic``."""
        partitions = self._log().admin().partitions(topic)
        lags = {(lag.topic, lag.partition): lag for lag in self._log().admin().group_lag(group)}
        return all(p.end_offset == 0 or ((lag := lags.get((topic, p.partition))) is not None
                                         and lag.committed == p.end_offset)
                   for p in partitions)

    def end_offsets(self, topic: str) -> int:
        """The number of records ``topic`` holds (all partitions)."""
        admin = self._log().admin()
        if topic not in admin.topics():
            return 0
        return sum(p.end_offset for p in admin.partitions(topic))

    def messages(self, topic: str) -> list[Message]:
        """Every record of ``topic``."""
        if topic not in self._log().admin().topics():
            return []
        consumer = self._log().consumer(f"check-{time.monotonic_ns()}", topics=[topic],
                                        start=StartAt.earliest())
        found: list[Message] = []
        try:
            while batch := consumer.poll(10_000, timeout=0.3):
                found.extend(batch)
        finally:
            consumer.close()
        return found

    def close(self) -> None:
        """Stop the connectors, then the capture; close the log."""
        for runner in list(self._runners):
            runner.stop()
        for runner in self._runners:
            runner.join(timeout=60)
        self._runners.clear()
        self._stop_capture.set()
        if self._capture_thread is not None:
            self._capture_thread.join(timeout=30)
        if self.log is not None:
            self.log.close()
