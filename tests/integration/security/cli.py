"""Running ``cdc`` commands as a user would, capturing everything they print."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    """One finished command: its arguments, exit status and output."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def cdc(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> Run:
    """Run ``cdc ARGS`` to completion."""
    done = subprocess.run([sys.executable, "-m", "cdc.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})
    return Run(args, done.returncode, done.stdout, done.stderr)


def cdc_for(seconds: float, *args: str, env: dict[str, str] | None = None) -> Run:
    """Run a long-running ``cdc ARGS`` for ``seconds`` (unless it ends first), then
    SIGTERM it; its output."""
    proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return Run(args, proc.returncode, out, err)


def doctor_findings(run: Run) -> dict[str, tuple[str, str, str]]:
    """``cdc doctor`` output as {check: (level, detail, fix)}."""
    findings: dict[str, tuple[str, str, str]] = {}
    last = ""
    for line in run.stdout.splitlines():
        if line.startswith("      fix: ") and last:
            level, detail, _ = findings[last]
            findings[last] = (level, detail, line.removeprefix("      fix: "))
        elif ": " in line:
            level, _, rest = line.partition(" ")
            check, _, detail = rest.strip().partition(": ")
            findings[check] = (level, detail, "")
            last = check
    return findings
