"""Progress of a snapshot per table: a rich bar each on a terminal, log lines otherwise."""

from __future__ import annotations

import logging
import sys
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported when bars are drawn: ~40 ms every command skips
    from rich.progress import Progress, TaskID

log = logging.getLogger(__name__)

LOG_EVERY_S = 10.0


class SnapshotProgress:
    """Rows read per table. Thread-safe: tables may be read in parallel."""

    def __init__(self, *, interactive: bool | None = None,
                 log_every_s: float = LOG_EVERY_S) -> None:
        """``interactive``: draw bars (default: when stderr is a terminal); else log a
        table's progress at most every ``log_every_s``."""
        if interactive is None:
            interactive = sys.stderr.isatty()
        self._lock = threading.Lock()
        self._log_every_s = log_every_s
        self._rows: dict[str, int] = {}
        self._estimates: dict[str, int | None] = {}
        self._started: dict[str, float] = {}
        self._next_log: dict[str, float] = {}
        self._tasks: dict[str, TaskID] = {}
        self._bars: Progress | None = None
        if interactive:
            from rich.console import Console

            from cdc.progress_bars import progress_bars

            self._bars = progress_bars(Console(stderr=True), remaining=True)
            self._bars.start()

    def start(self, table: str, estimate: int | None) -> None:
        """``table`` is being read; ``estimate`` rows expected (None: unknown)."""
        with self._lock:
            now = time.monotonic()
            self._rows[table], self._estimates[table] = 0, estimate
            self._started[table], self._next_log[table] = now, now + self._log_every_s
            if self._bars is not None:
                self._tasks[table] = self._bars.add_task(table, total=estimate)

    def advance(self, table: str, rows: int) -> None:
        """``rows`` more rows of ``table`` are in the log."""
        with self._lock:
            done = self._rows[table] = self._rows[table] + rows
            if self._bars is not None:
                self._bars.advance(self._tasks[table], rows)
                return
            now = time.monotonic()
            if now < self._next_log[table]:
                return
            self._next_log[table] = now + self._log_every_s
            estimate = self._estimates[table]
            share = f" of ~{estimate} ({100 * done / estimate:.0f}%)" if estimate else ""
            log.info("snapshot of %s: %d rows%s, %.0f rows/s", table, done, share,
                     done / max(now - self._started[table], 1e-6))

    def finish(self, table: str) -> None:
        """``table`` is read completely."""
        with self._lock:
            rows, seconds = self._rows[table], time.monotonic() - self._started[table]
            if self._bars is not None:
                self._bars.update(self._tasks[table], total=rows, completed=rows)
        log.info("snapshot of %s: %d rows in %.1f s", table, rows, seconds)

    def close(self) -> None:
        """Stop drawing the bars."""
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    def __enter__(self) -> SnapshotProgress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
