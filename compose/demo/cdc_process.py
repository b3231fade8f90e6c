"""``cdc run`` as a child process: started, watched, and always stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg


class CdcRunError(RuntimeError):
    """``cdc run`` exited early or did not start streaming."""


class CdcRun:
    """A ``cdc run -c FILE`` process; its output goes to ``log_path`` (by default
    ``cdc-run.log`` beside the file)."""

    def __init__(self, config: Path, log_path: Path | None = None) -> None:
        self.config = config
        self.log_path = log_path or config.parent / "cdc-run.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Spawn the process in its own process group."""
        with self.log_path.open("ab") as out:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "cdc.cli", "run", "-c", str(self.config)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)

    def check_alive(self) -> None:
        """Raise CdcRunError (with the log's tail) when the process has exited."""
        if self._proc is not None and self._proc.poll() is not None:
            raise CdcRunError(f"cdc run exited with {self._proc.returncode}:\n{self.log_tail()}")

    def wait_streaming(self, dsn: str, slot: str, timeout: float = 60) -> None:
        """Wait until the capture holds its replication slot."""
        deadline = time.monotonic() + timeout
        with psycopg.connect(dsn, autocommit=True) as conn:
            while time.monotonic() < deadline:
                self.check_alive()
                if conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s "
                                "AND active", (slot,)).fetchone():
                    return
                time.sleep(0.2)
        raise CdcRunError(f"cdc run did not start streaming within {timeout:.0f} s:\n"
                          f"{self.log_tail()}")

    def stop(self, timeout: float = 60) -> int | None:
        """SIGTERM (the capture and connectors finish cleanly), SIGKILL after ``timeout``."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        return proc.returncode

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the process's output."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@contextlib.contextmanager
def cdc_run(config: Path, log_path: Path | None = None) -> Iterator[CdcRun]:
    """Run ``cdc run -c config`` for the ``with`` block; stop it on the way out."""
    process = CdcRun(config, log_path)
    process.start()
    try:
        yield process
    finally:
        process.stop()
