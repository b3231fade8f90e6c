"""Checkpoints of the batch journal: sync the segments written, then drop the journal.

The producer calls ``maybe_start`` after each journaled append. When the current journal
file is big or old enough, it is rotated and a background thread makes every segment
written since the previous rotation durable, then deletes the finished journal file. On
Linux that is one ``syncfs`` of the log's file system (one journal commit however many
segments were written); elsewhere, one fdatasync per segment. One
checkpoint runs at a time; a failure is raised by the producer's next append (the log
can no longer promise durability, so the capture must stop rather than acknowledge).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from cdc.errors import LogError

from .journal import Journal, discard
from .writer import PartitionWriter, sync_file

CHECKPOINT_BYTES = 64 << 20  # a journal file this big is rotated ...
CHECKPOINT_S = 10.0  # ... and so is one this old


def _load_syncfs() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        syncfs = ctypes.CDLL(name, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    syncfs.argtypes = [ctypes.c_int]
    syncfs.restype = ctypes.c_int
    return syncfs


_SYNCFS = _load_syncfs()


def sync_segments(root: Path, segments: Sequence[str]) -> None:
    """Make ``segments`` (files under ``root``) durable: ``syncfs`` where there is one."""
    if _SYNCFS is not None and segments:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if _SYNCFS(fd) == 0:
                return
            errno = ctypes.get_errno()
        finally:
            os.close(fd)
        raise OSError(errno, f"syncfs of {root}: {os.strerror(errno)}")
    for path in segments:
        sync_file(path)


class Checkpointer:
    """Rotates the journal and syncs what the finished file covered, in the background."""

    def __init__(self, root: Path, journal: Journal, *, max_bytes: int | None = None,
                 max_age_s: float | None = None) -> None:
        self.journal = journal
        self._root = root
        self._max_bytes = CHECKPOINT_BYTES if max_bytes is None else max_bytes
        self._max_age_s = CHECKPOINT_S if max_age_s is None else max_age_s
        self._written: dict[PartitionWriter, None] = {}  # since the last rotation, in order
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-checkpoint")
        self._running: Future[None] | None = None

    def wrote(self, writers: Sequence[PartitionWriter]) -> None:
        """Note partitions just written under the current journal file."""
        self._written.update(dict.fromkeys(writers))

    def maybe_start(self) -> None:
        """Start a checkpoint if one is due and none is running; raise a failed one's
        error."""
        journal = self.journal
        if not journal.bytes_written or (
                journal.bytes_written < self._max_bytes
                and time.monotonic() - journal.started < self._max_age_s):
            return
        if self._running is not None:
            if not self._running.done():
                return
            self._collect()
        segments = [writer.segment_path for writer in self._written]
        self._written.clear()
        finished = journal.rotate()
        self._running = self._thread.submit(self._sync_then_discard, segments, finished)

    def _collect(self) -> None:
        running, self._running = self._running, None
        if running is None:
            return
        try:
            running.result()
        except OSError as exc:
            raise LogError(f"cannot make the log durable: a checkpoint failed to sync a "
                           f"segment ({exc}); the capture stops rather than acknowledge "
                           "what might be lost") from exc

    def finish(self) -> None:
        """Sync everything written and delete every journal file (on close). A journal
        file that holds no batch (every batch since the last rotation made durable by
        its segment's own fdatasync) covers nothing: deleted with no sync at all."""
        self._collect()
        self._thread.shutdown(wait=True)
        segments = [writer.segment_path for writer in self._written]
        self._written.clear()
        finished = self.journal.path
        empty = not self.journal.bytes_written
        self.journal.close()
        if empty:  # a crash before the deletion is durable leaves an empty file: no-op
            finished.unlink(missing_ok=True)
        else:
            self._sync_then_discard(segments, finished)

    def _sync_then_discard(self, segments: Sequence[str], journal_file: Path) -> None:
        sync_segments(self._root, segments)
        discard([journal_file])
