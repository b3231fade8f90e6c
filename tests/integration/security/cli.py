"""Running ``cdc`` commands as a user would, capturing everything they print."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.integration.connectors.harness import wait_until
from tests.processes import stop_process


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


def connector_pipeline(directory: Path, name: str, kind: str,
                       settings: dict[str, object]) -> Path:
    """A pipeline file with one connector ``name`` of type ``kind`` (``settings`` its
    ``config``) over a file log in ``directory``; its source is never contacted by
    ``cdc connect``."""
    path = directory / "pipeline.yaml"
    path.write_text(yaml.safe_dump({
        "source": {"dsn": "postgresql://127.0.0.1:9/none", "slot": "logins",
                   "publication": "logins"},
        "connectors": [{"name": name, "type": kind, "topics": ["logins.public.t"],
                        "config": settings}],
        "log": {"backend": "file", "path": str(directory / "log")}}))
    return path


def the_one_error_line(run: Run) -> str:
    """The ``Error: …`` line a command stopped with: exit status 2, the only such line
    and the last one printed, no traceback or ERROR log before it."""
    assert run.returncode == 2, run.stderr[-3000:]
    errors = [line for line in run.stderr.splitlines() if line.startswith("Error: ")]
    assert errors == run.stderr.strip().splitlines()[-1:], run.stderr[-3000:]
    assert "Traceback" not in run.stderr and " ERROR " not in run.stderr, run.stderr[-3000:]
    return errors[0]


def cdc(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> Run:
    """Run ``cdc ARGS`` to completion."""
    done = subprocess.run([sys.executable, "-m", "cdc.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})
    return Run(args, done.returncode, done.stdout, done.stderr)


def cdc_for(seconds: float, *args: str, env: dict[str, str] | None = None) -> Run:
    """Run a long-running ``cdc ARGS`` for ``seconds`` (unless it ends first), then
    SIGTERM it; its output. For looking at whatever it prints meanwhile (no secret in
    it): to wait for something it does, use ``cdc_until``."""
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


def cdc_until(done: Callable[[str], bool], what: str, *args: str, timeout: float = 120,
              env: dict[str, str] | None = None) -> Run:
    """Run a long-running ``cdc ARGS`` until ``done`` holds for what it printed so far
    (stdout and stderr), then SIGTERM it; its output. The test fails naming ``what`` when
    that takes more than ``timeout`` seconds, or when the command ends without it."""
    proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    assert proc.stdout is not None and proc.stderr is not None
    out: list[str] = []
    err: list[str] = []
    readers = [threading.Thread(target=into.extend, args=(stream,), daemon=True)  # by line
               for stream, into in ((proc.stdout, out), (proc.stderr, err))]
    for reader in readers:
        reader.start()

    def printed() -> str:
        return "".join(out) + "".join(err)

    def ready() -> bool:
        if proc.poll() is None:
            return done(printed())
        for reader in readers:  # ended: read what is left before the last look
            reader.join(10)
        assert done(printed()), (f"cdc {' '.join(args)} exited ({proc.returncode}) "
                                 f"before {what}: {printed()[-3000:]}")
        return True

    try:
        wait_until(ready, timeout=timeout, what=f"{what} (cdc {' '.join(args)})", interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; it printed: {printed()[-3000:]}") from exc
    finally:
        if proc.poll() is None:
            stop_process(proc)
        for reader in readers:
            reader.join(10)
    return Run(args, proc.returncode, "".join(out), "".join(err))


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
