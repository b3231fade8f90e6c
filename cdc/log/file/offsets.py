"""Committed offsets of a consumer group: one append-only journal per group.

    <root>/_groups/<group>/offsets.log   lines "<partition> <offset> <topic>", newest last

A commit appends the changed partitions' lines in one write and one fsync, however many
partitions it covers (a file per partition would cost two fsyncs each). Readers replay
the journal, the last line of a partition winning, and keep their place so a refresh
reads only what was appended since. When the journal grows well past its live content
it is rewritten (temporary file, fsync, rename) under an exclusive ``flock``; appenders
hold a shared one and check they still write to the current file. A line torn by a
crash is skipped (every write starts with a newline, so it never joins the next one).
Offsets of older logs (``offsets/<topic dir>~<p>`` files) are read as a base.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
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

    def __init__(self, root: Path, group: str) -> None:
        self._root = root
        self.directory = group_dir(root, group)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / JOURNAL
        self._state: dict[TopicPartition, int] = {}
        self._inode = -1
        self._read_to = 0

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
        """Durably replace the committed offsets of several partitions (one fsync)."""
        if not offsets:
            return
        data = b"\n" + b"".join(b"%d %d %s\n" % (tp.partition, offset, tp.topic.encode())
                                for tp, offset in offsets.items())
        while True:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                if os.fstat(fd).st_ino != _inode_of(self.path):
                    continue  # rewritten meanwhile: append to the new file
                os.write(fd, data)
                os.fsync(fd)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            break
        if size > max(COMPACT_MIN_BYTES, 8 * 48 * (len(self._state) + len(offsets))):
            self._compact()

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
