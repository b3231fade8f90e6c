"""Committed offsets of a consumer group: one append-only journal per group.

    <root>/_groups/<group>/offsets.log   lines "<partition> <offset> <topic>", newest last

A commit appends the changed partitions' lines in one write, however many partitions it
covers (a file per partition would cost two fsyncs each), and fsyncs the journal: at
once by default, or, for a store made with ``sync_every`` (a group member's,
``FileConsumer``), at most that often, on ``sync`` and on ``close``. Either way every
other reader sees a commit as soon as ``put_many`` returns (it is in the page cache):
rebalancing, lag and a restarted process read it. Only a machine crash can lose commits
not synced yet, and then the group reads again from an earlier commit: sinks are
idempotent and versioned, so delivering some events again is harmless, and a commit
never goes past what was written (the journal only loses lines at its end; a line cut
short is skipped). Readers replay the journal, the last line of a partition winning, and
keep their place so a refresh reads only what was appended since. When the journal grows
well past its live content it is rewritten (temporary file, fsync, rename) under an
exclusive ``flock``; appenders hold a shared one while they write and check they still
write to the current file. A line torn by a crash is skipped (every write starts with a
newline, so it never joins the next one). Offsets of older logs
(``offsets/<topic dir>~<p>`` files) are read as a base.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path

from ..records import TopicPartition
from .groups import group_dir
from .names import topic_of_dir
from .writer import fsync_dir

JOURNAL = "offsets.log"
COMPACT_MIN_BYTES = 1 << 20


class OffsetStore:
    """Committed offsets of one group."""

    def __init__(self, root: Path, group: str, *, sync_every: float = 0.0,
                 compact_min_bytes: int = COMPACT_MIN_BYTES) -> None:
        """``sync_every``: seconds a commit may stay unsynced (0: fsync every commit);
        ``compact_min_bytes``: the journal is never rewritten while smaller."""
        self._root = root
        self.directory = group_dir(root, group)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / JOURNAL
        self._state: dict[TopicPartition, int] = {}
        self._inode = -1
        self._read_to = 0
        self._sync_every = sync_every
        self._compact_min_bytes = compact_min_bytes
        self._fd = -1  # the journal, open for appending once this store wrote to it
        self._unsynced = False
        self._synced_at = -math.inf  # never: the first commit is synced at once

    # -- reading -----------------------------------------------------------------------
    def _refresh(self) -> None:
        try:
            with self.path.open("rb") as journal:
                stat = os.fstat(journal.fileno())
                if stat.st_ino != self._inode or stat.st_size < self._read_to:
                    self._state = self._legacy()
                    self._inode, self._read_to = stat.st_ino, 0
                journal.seek(self._read_to)
                data = journal.read()
        except FileNotFoundError:
            if self._inode != 0:
                self._state, self._inode, self._read_to = self._legacy(), 0, 0
            return
        end = data.rfind(b"\n") + 1
        for line in data[:end].split(b"\n"):
            self._apply(line)
        self._read_to += end

    def _apply(self, line: bytes) -> None:
        parts = line.split(b" ", 2)
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit() and parts[2]:
            self._state[TopicPartition(parts[2].decode(), int(parts[0]))] = int(parts[1])

    def _legacy(self) -> dict[TopicPartition, int]:
        found: dict[TopicPartition, int] = {}
        directory = self.directory / "offsets"
        if not directory.is_dir():
            return found
        for path in directory.iterdir():
            dir_name, sep, part = path.name.rpartition("~")
            if sep and part.isdigit() and not path.name.startswith("."):
                topic = topic_of_dir(self._root, dir_name)
                if topic is not None:
                    with contextlib.suppress(ValueError, FileNotFoundError):
                        found[TopicPartition(topic, int(part))] = int(path.read_text().strip())
        return found

    def get(self, tp: TopicPartition) -> int | None:
        """The committed next offset of ``tp``, or None."""
        self._refresh()
        return self._state.get(tp)

    def all(self) -> dict[TopicPartition, int]:
        """Every committed offset of the group."""
        self._refresh()
        return dict(self._state)

    # -- writing -----------------------------------------------------------------------
    def put(self, tp: TopicPartition, offset: int) -> None:
        """Durably replace the committed offset of ``tp``."""
        self.put_many({tp: offset})

    def put_many(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Replace the committed offsets of several partitions (one write; one fsync now,
        or within ``sync_every`` seconds)."""
        if not offsets:
            return
        data = b"\n" + b"".join(b"%d %d %s\n" % (tp.partition, offset, tp.topic.encode())
                                for tp, offset in offsets.items())
        while True:
            if self._fd < 0:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            fd = self._fd
            fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                if os.fstat(fd).st_ino != _inode_of(self.path):
                    # rewritten meanwhile (with what this store wrote, synced): append to
                    # the new file
                    self._fd = -1
                    os.close(fd)
                    continue
                os.write(fd, data)
                size = os.fstat(fd).st_size
            finally:
                if self._fd == fd:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            break
        self._unsynced = True
        if time.monotonic() - self._synced_at >= self._sync_every:
            self.sync()
        if size > max(self._compact_min_bytes, 8 * 48 * (len(self._state) + len(offsets))):
            self._compact()

    def sync(self) -> None:
        """fsync the commits not synced yet."""
        if self._unsynced and self._fd >= 0:
            os.fsync(self._fd)
        self._unsynced = False
        self._synced_at = time.monotonic()

    def sync_if_due(self) -> None:
        """``sync`` when a commit has waited ``sync_every`` seconds or more."""
        if self._unsynced and time.monotonic() - self._synced_at >= self._sync_every:
            self.sync()

    def close(self) -> None:
        """Sync, and close the journal."""
        self.sync()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _compact(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._refresh()
            tmp = self.path.with_name(f".{JOURNAL}.{os.getpid()}.tmp")
            with tmp.open("wb") as out:
                out.write(b"".join(b"%d %d %s\n" % (tp.partition, offset, tp.topic.encode())
                                   for tp, offset in self._state.items()))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
            fsync_dir(self.directory)
        finally:
            os.close(fd)


def _inode_of(path: Path) -> int:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return -1
