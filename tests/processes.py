"""Stopping the child processes tests start (``cdc run``, ``cdc capture``…)."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def stop_process(process: subprocess.Popen[Any], timeout_s: float = 60) -> None:
    """SIGTERM, wait up to ``timeout_s`` for a clean exit, then SIGKILL."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
