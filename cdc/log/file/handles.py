"""A bounded pool of open files shared by the writers and readers of one ``FileLog``.

Every partition writer (2 files: segment and index) and reader (1 file) opens its files
only inside ``pool.use(owner)``; the pool keeps at most ``capacity`` files open and closes
the least recently used owner's files to make room. An owner in use is never closed
under it. Closing a writer fsyncs what it appended first (when the log fsyncs), so the
pool never weakens durability. So a process's open files stay bounded whatever the
number of topics and partitions.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class PooledFiles(Protocol):
    """Something that holds a few files open while the pool lets it."""

    @property
    def file_count(self) -> int:
        """How many files it holds while open."""

    @property
    def has_open_files(self) -> bool:
        """True while it holds a file open."""

    def close_files(self) -> None:
        """Close its files (making appended data durable first); reopened on next use."""


class HandlePool:
    """Least-recently-used bound on the files open through it (thread-safe)."""

    def __init__(self, capacity: int = 128) -> None:
        if capacity < 2:
            raise ValueError("log.open_files: at least 2 files are needed")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._open: OrderedDict[PooledFiles, int] = OrderedDict()  # owner → files, LRU first
        self._busy: dict[PooledFiles, int] = {}
        self._used = 0
        self.peak = 0
        self.evictions = 0

    @property
    def open_files(self) -> int:
        """Files counted open now."""
        return self._used

    @contextmanager
    def use(self, owner: PooledFiles) -> Iterator[None]:
        """Let ``owner`` keep its files open for the block (it opens them lazily)."""
        self.acquire(owner)
        try:
            yield
        finally:
            self.release(owner)

    def acquire(self, owner: PooledFiles) -> None:
        """Let ``owner`` open its files until the matching ``release``."""
        with self._lock:
            if owner in self._open:
                self._open.move_to_end(owner)
            else:
                count = owner.file_count
                self._make_room(count)
                self._open[owner] = count
                self._used += count
                if self._used > self.peak:
                    self.peak = self._used
            self._busy[owner] = self._busy.get(owner, 0) + 1

    def release(self, owner: PooledFiles) -> None:
        """End an ``acquire``: the owner's files may be closed to make room from now on."""
        with self._lock:
            left = self._busy[owner] - 1
            if left:
                self._busy[owner] = left
            else:
                del self._busy[owner]
                if not owner.has_open_files:  # it found nothing to open
                    self._used -= self._open.pop(owner, 0)

    def _make_room(self, needed: int) -> None:
        opened, busy = self._open, self._busy
        skipped = []
        while self._used + needed > self.capacity and opened:
            victim, count = opened.popitem(last=False)
            if victim in busy:
                skipped.append((victim, count))
                continue
            self._used -= count
            self.evictions += 1
            victim.close_files()
        for victim, count in reversed(skipped):  # in use: they keep their place
            opened[victim] = count
            opened.move_to_end(victim, last=False)
        # only owners in use are left: go over the bound for a moment rather than wait

    def forget(self, owner: PooledFiles) -> None:
        """Close ``owner``'s files and stop counting them (the owner is closing)."""
        with self._lock:
            count = self._open.pop(owner, None)
            if count is not None:
                self._used -= count
            owner.close_files()
