"""Per-topic writer locks: whoever appends to a topic holds ``<root>/_writers/<topic>.lock``.

The capture's producer takes the lock of every topic it writes and keeps it; a
``FileTopicProducer`` (a connector's dead-letter topic) takes its topic's lock around each
append. So one topic never has two writers at once, while different topics of one log
may be written by different processes. ``flock`` locks belong to an open file, so two
handles in one process exclude each other too, and a killed process loses its locks.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from cdc.errors import LogError, TransientError

LOCKS_DIR = "_writers"
POLL_S = 0.02


class TopicBusyError(LogError, TransientError):
    """Another producer holds the topic's writer lock (retry later, or stop that writer)."""


def topic_lock_path(root: Path, topic: str) -> Path:
    """The lock file of ``topic``."""
    return root / LOCKS_DIR / f"{topic}.lock"


class TopicLock:
    """The exclusive writer lock of one topic."""

    def __init__(self, root: Path, topic: str) -> None:
        self.topic = topic
        self.path = topic_lock_path(root, topic)
        self._fd = -1

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def try_acquire(self) -> bool:
        """Take the lock if it is free; True when held."""
        if self._fd >= 0:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def acquire(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for the lock; LogError naming the topic after that."""
        deadline = time.monotonic() + timeout
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise TopicBusyError(f"topic {self.topic!r} is being written by another producer "
                               f"(lock {self.path} held for over {timeout:g} s)")
            time.sleep(POLL_S)

    def release(self) -> None:
        """Give the lock up."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
