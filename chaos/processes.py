"""``cdc capture`` and ``cdc connect`` as supervised child processes.

A supervisor thread starts the child again whenever it exits — killed by the harness
(SIGKILL) or failed on its own (the log's disk full, say) — after a short back-off, the
way systemd or Kubernetes would. Every start is a new run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


class SupervisedProcess:
    """One ``cdc`` command kept running until ``stop``; output appended to ``log_path``."""

    def __init__(self, name: str, args: list[str], log_path: Path) -> None:
        self.name = name
        self.argv = [sys.executable, "-m", "cdc.cli", *args]
        self.log_path = log_path
        self.runs = 0
        self.kills = 0
        self.failures = 0  # exits the harness did not cause
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._killed_pids: set[int] = set()
        self._thread = threading.Thread(target=self._supervise, name=f"supervise-{name}",
                                        daemon=True)

    def start(self) -> None:
        """Start the child and its supervisor."""
        self._spawn()
        self._thread.start()

    def _spawn(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self._lock, self.log_path.open("ab") as out:
            out.write(f"--- run {self.runs + 1} at {time.strftime('%X')}\n".encode())
            out.flush()
            self._proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True,
                                          env=env)
            self.runs += 1

    def spawn_once(self, extra_env: dict[str, str]) -> subprocess.Popen[bytes]:
        """One run outside supervision (before ``start``), with ``extra_env`` set, e.g. a
        crash point; the caller waits for it."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra_env}
        with self.log_path.open("ab") as out:
            out.write(f"--- run {self.runs + 1} (once) at {time.strftime('%X')}\n".encode())
            out.flush()
            self.runs += 1
            return subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, env=env)

    def _supervise(self) -> None:
        backoff = 0.3
        while not self._stopping.is_set():
            proc = self._proc
            if proc is None or proc.poll() is None:
                self._stopping.wait(0.1)
                continue
            killed_by_us = proc.pid in self._killed_pids
            if not killed_by_us:
                self.failures += 1
                backoff = min(backoff * 2, 3.0)
            else:
                backoff = 0.3
            if self._stopping.wait(backoff):
                return
            self._spawn()

    def alive(self) -> bool:
        """True while a child runs."""
        proc = self._proc
        return proc is not None and proc.poll() is None

    def wait_alive(self, timeout: float) -> bool:
        """Wait until a child runs (it may be between runs); False after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not self.alive():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def kill(self) -> bool:
        """SIGKILL the running child (the supervisor starts it again); False if none ran."""
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                return False
            self._killed_pids.add(proc.pid)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        self.kills += 1
        return True

    @property
    def pid(self) -> int | None:
        """The running child's pid (None between runs)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def signal(self, signum: int) -> bool:
        """Send ``signum`` to the running child's process group; False if none ran."""
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                return False
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signum)
        return True

    def stop(self, timeout: float = 60) -> int | None:
        """Stop supervising, then SIGTERM the child (SIGKILL after ``timeout``)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGCONT)  # a stalled child cannot stop
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        return proc.returncode

    def log_tail(self, lines: int = 15) -> str:
        """The last lines the children wrote."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
