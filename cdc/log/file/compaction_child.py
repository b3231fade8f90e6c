"""Scheduled compaction in a child process, so the capture keeps its interpreter lock and
its memory.

Compaction reads whole partitions: every record of the closed segments, a dictionary
entry per key. On a thread of the capture's process it held the interpreter lock the
capture's hot loop needs for seconds at a time, and the objects it made fragmented the
capture's heap, whose resident size then grew with every round (``make soak``). A child
process started for each scheduled round (``Housekeeping``'s background thread) does the
reading instead, at a lower CPU priority, and gives all of its memory back when it ends.

The child takes one partition at a time, in lockstep with its parent: the parent writes
what to compact (a JSON line on the child's stdin) and reads what it did (a JSON line on
its stdout), so the parent always knows which partition is in hand (retention leaves that
one alone) and a stop takes effect between partitions. The child dies with the thread
that started it (``PR_SET_PDEATHSIG``), so a capture killed mid-round never leaves a
compaction running beside the one its successor starts: each segment is rewritten to a
temporary file and renamed over the old one, so a child killed mid-rewrite leaves the
old segment whole.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from pathlib import Path

import orjson

from .compaction import CompactionResult

log = logging.getLogger(__name__)

MODULE = "cdc.log.file.compaction_process"  # the child's side; nothing imports it
CLOSE_TIMEOUT_S = 10.0
_SOURCE_ROOT = str(Path(__file__).resolve().parents[3])  # where ``cdc`` is importable from


class CompactionFailed(RuntimeError):
    """The child could not compact a partition, or it ended."""


class CompactionChild:
    """A compaction process for one round: ``compact`` one partition after another, then
    ``close``."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            path for path in (_SOURCE_ROOT, env.get("PYTHONPATH")) if path)
        self._process = subprocess.Popen(
            [sys.executable, "-m", MODULE, str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def alive(self) -> bool:
        """False once the process has ended (killed, or it failed to start Python)."""
        return self._process.poll() is None

    def compact(self, directory: Path, topic: str, partition: int, *,
                delete_retention_ms: int, min_dirty_ratio: float) -> CompactionResult:
        """What ``compact_partition`` does, done by the child."""
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        job = {"directory": str(directory), "topic": topic, "partition": partition,
               "delete_retention_ms": delete_retention_ms, "min_dirty_ratio": min_dirty_ratio}
        try:
            stdin.write(orjson.dumps(job) + b"\n")
            stdin.flush()
            line = stdout.readline()
        except OSError as exc:
            raise CompactionFailed(f"the compaction process is gone: {exc}") from exc
        if not line:
            raise CompactionFailed(
                f"the compaction process ended (exit status {self._process.wait()})")
        answer = orjson.loads(line)
        if "error" in answer:
            raise CompactionFailed(answer["error"])
        result = CompactionResult(answer["rewritten"], answer["removed"])
        if result.segments_rewritten:
            log.info("compacted %d segments, %d records removed", result.segments_rewritten,
                     result.records_removed, extra={"topic": topic, "partition": partition})
        return result

    def close(self) -> None:
        """End the child (it exits when its stdin closes) and wait for it."""
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        try:
            self._process.wait(CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
