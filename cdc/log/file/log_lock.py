"""The file log's writer lock: one capture, through one ``FileProducer``, per log.

``<root>/.writer.lock`` is held (``flock``) for as long as the producer is open; a
second capture on the same directory fails instead of interleaving appends. It fails
after ``WAIT_S``, not at once: a capture on its way out (its ``cdc run`` killed, the
child stopping cleanly; a service manager restarting ``cdc`` at once) still holds the
lock for a moment. A connector appending to its own dead-letter topic takes only that
topic's lock (``topic_lock``).
"""

from __future__ import annotations

import os
from pathlib import Path

from cdc.errors import LogError, TerminalError
from cdc.flock import take_flock

WAIT_S = 15.0  # how long a new writer waits for the one before it to let go


class LogTakenError(LogError, TerminalError):
    """Another capture holds the file log's writer lock (``cdc run`` stops, no restart)."""


class LogWriterLock:
    """The log-wide writer lock, taken when made; ``LogTakenError`` if it is still held
    after ``wait_s`` seconds."""

    def __init__(self, root: Path, wait_s: float = WAIT_S) -> None:
        fd = take_flock(root / ".writer.lock", wait_s,
                        f"the log at {root} is held by another writer")
        if fd is None:
            raise LogTakenError(f"another capture is writing to the log at {root}: the file "
                                "log takes one capture on one host; replicas that take over "
                                "from each other need the Kafka backend (log.backend: kafka)")
        self._fd = fd

    def release(self) -> None:
        """Let another producer take the log (closing the file drops the lock)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
