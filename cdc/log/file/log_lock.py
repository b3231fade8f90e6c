"""The file log's writer lock: one capture, through one ``FileProducer``, per log.

``<root>/.writer.lock`` is held (``flock``) for as long as the producer is open; a
second capture on the same directory fails at once instead of interleaving appends. A
connector appending to its own dead-letter topic takes only that topic's lock
(``topic_lock``).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from cdc.errors import LogError, TerminalError


class LogTakenError(LogError, TerminalError):
    """Another capture holds the file log's writer lock (``cdc run`` stops, no restart)."""


class LogWriterLock:
    """The log-wide writer lock, taken when made (``LogTakenError`` if it is held)."""

    def __init__(self, root: Path) -> None:
        self._fd = os.open(root / ".writer.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = -1
            raise LogTakenError(f"another capture is writing to the log at {root}: the file "
                                "log takes one capture on one host; replicas that take over "
                                "from each other need the Kafka backend (log.backend: kafka)"
                                ) from None

    def release(self) -> None:
        """Let another producer take the log (closing the file drops the lock)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
