"""Per-topic writer locks: whoever appends to a topic holds that topic's lock.

The locks live in ``<root>/_writers/topics.lock`` (one byte range per topic, see
``locks.RangeLocks``), so the capture's producer keeps the locks of thousands of topics
with one open file. It takes the lock of every topic it writes and keeps it; a
``FileTopicProducer`` (a connector's dead-letter topic) takes its topic's lock around
each append. So one topic never has two writers at once, while different topics of one
log may be written by different processes; a killed process loses its locks.
"""

from __future__ import annotations

import time
from pathlib import Path

from cdc.errors import LogError, TransientError

from .locks import RangeLocks

LOCKS_DIR = "_writers"
POLL_S = 0.02


class TopicBusyError(LogError, TransientError):
    """Another producer holds the topic's writer lock (retry later, or stop that writer)."""


def topic_lock_path(root: Path) -> Path:
    """The file holding the writer locks of a log's topics."""
    return root / LOCKS_DIR / "topics.lock"


def topic_locks(root: Path) -> RangeLocks:
    """A table of writer locks of ``root``'s topics (one open file for all of them)."""
    return RangeLocks(topic_lock_path(root))


class TopicLock:
    """The exclusive writer lock of one topic (in ``table``, or in a table of its own)."""

    def __init__(self, root: Path, topic: str, table: RangeLocks | None = None) -> None:
        self.topic = topic
        self.path = topic_lock_path(root)
        self._own_table = table is None
        self._table = table if table is not None else topic_locks(root)

    @property
    def held(self) -> bool:
        return self._table.holds(self.topic)

    def try_acquire(self) -> bool:
        """Take the lock if it is free; True when held."""
        return self._table.try_lock(self.topic)

    def acquire(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for the lock; LogError naming the topic after that."""
        deadline = time.monotonic() + timeout
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise TopicBusyError(f"topic {self.topic!r} is being written by another producer "
                                     f"(lock {self.path} held for over {timeout:g} s)")
            time.sleep(POLL_S)

    def release(self) -> None:
        """Give the lock up (and the lock file, when the table is this lock's own)."""
        self._table.unlock(self.topic)
        if self._own_table:
            self._table.close()
