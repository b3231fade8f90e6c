"""The child's side of ``compaction_child``: compact the partitions the parent names.

Run as ``python -m cdc.log.file.compaction_process <parent pid>`` by ``CompactionChild``
only (nothing imports this module, so running it never meets a copy already imported).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
from pathlib import Path

import orjson

from .compaction import compact_partition

NICENESS = 10  # below the capture: compaction is never on the critical path
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """Be killed when the thread that started this process ends (Linux); exit now if
    that already happened."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def main(argv: list[str]) -> int:
    """Compact the partitions the parent names on stdin until it closes stdin."""
    _die_with(int(argv[0]))
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s compaction process: %(message)s")
    for line in sys.stdin.buffer:
        job = orjson.loads(line)
        answer: dict[str, int | str]
        try:
            result = compact_partition(Path(job["directory"]), job["topic"], job["partition"],
                                       delete_retention_ms=job["delete_retention_ms"],
                                       min_dirty_ratio=job["min_dirty_ratio"])
            answer = {"rewritten": result.segments_rewritten,
                      "removed": result.records_removed}
        except Exception as exc:  # the parent logs it and retries at the next round
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.buffer.write(orjson.dumps(answer) + b"\n")
        sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
