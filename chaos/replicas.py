"""The capture replicas of a chaos run: one on the file log, two on Kafka.

Which replica streams is PostgreSQL's answer: the walsender holding the slot names its
capture's pid in ``application_name`` (``distributary <host> <pid>``). Faults aimed at
the capture strike that one; the other stands by and must take over.
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection
from pathlib import Path

import psycopg

from .processes import SupervisedProcess

TAKEOVER = re.compile(r"took over slot ")


class CaptureReplicas:
    """``count`` supervised ``cdc capture`` processes of one pipeline file."""

    def __init__(self, count: int, pipeline: Path, workdir: Path, dsn: str,
                 slot: str) -> None:
        names = ["capture"] if count == 1 else [f"capture-{n}" for n in range(1, count + 1)]
        self.processes = [SupervisedProcess(name, ["capture", "-c", str(pipeline)],
                                            workdir / f"{name}.log") for name in names]
        self._dsn, self._slot = dsn, slot

    @property
    def first(self) -> SupervisedProcess:
        return self.processes[0]

    def start(self) -> None:
        """Start every replica and its supervisor."""
        for process in self.processes:
            process.start()

    def streaming(self, timeout: float,
                  besides: Collection[SupervisedProcess] = ()) -> SupervisedProcess:
        """The replica streaming the slot now, unless it is one of ``besides`` (stalled:
        wait for the takeover); after ``timeout`` without one (PostgreSQL down, a
        takeover under way), any replica."""
        if len(self.processes) == 1:
            return self.first
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = self._streaming_pid()
            found = next((p for p in self.processes if pid is not None and p.pid == pid), None)
            if found is not None and found not in besides:
                return found
            time.sleep(0.2)
        return next((p for p in self.processes if p.alive()), self.first)

    def _streaming_pid(self) -> int | None:
        try:
            with psycopg.connect(self._dsn, connect_timeout=5, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT r.application_name FROM pg_replication_slots s "
                    "JOIN pg_stat_replication r ON r.pid = s.active_pid "
                    "WHERE s.slot_name = %s AND r.state = 'streaming'",
                    (self._slot,)).fetchone()
        except psycopg.Error:
            return None
        if row is None:
            return None
        last = str(row[0]).rsplit(" ", 1)[-1]
        return int(last) if last.isdigit() else None

    def takeovers(self) -> int:
        """Takeovers the replicas logged (``took over slot …``)."""
        total = 0
        for process in self.processes:
            try:
                total += len(TAKEOVER.findall(process.log_path.read_text(errors="replace")))
            except OSError:
                continue
        return total

    @property
    def runs(self) -> int:
        return sum(p.runs for p in self.processes)

    @property
    def failures(self) -> int:
        return sum(p.failures for p in self.processes)
