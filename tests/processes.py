"""Starting and stopping the child processes tests run (``cdc run``, ``cdc capture``…)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any


def start_cdc_run(config: Path, stderr: Path) -> subprocess.Popen[bytes]:
    """``cdc run -c config`` with JSON logs appended to ``stderr``."""
    return start_cdc("run", config, stderr)


def start_cdc(command: str, config: Path, stderr: Path) -> subprocess.Popen[bytes]:
    """``cdc <command> -c config`` with JSON logs appended to ``stderr``."""
    with stderr.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "cdc.cli", "--log-format", "json", command, "-c",
             str(config)], stdout=subprocess.DEVNULL, stderr=err)


def stop_process(process: subprocess.Popen[Any], timeout_s: float = 60) -> None:
    """SIGTERM, wait up to ``timeout_s`` for a clean exit, then SIGKILL."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stop_or_fail(process: subprocess.Popen[Any], timeout_s: float = 60) -> int:
    """SIGTERM and the exit status of a clean stop within ``timeout_s``; else SIGKILL (so
    nothing is left running: its children stop once their parent is gone) and an
    ``AssertionError`` saying it ignored the SIGTERM."""
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError(f"{process.args!r} did not stop within {timeout_s:.0f} s of "
                             "SIGTERM; killed it") from None
