"""Retention and compaction of the partitions a producer writes, each on its schedule.

A producer calls ``after_append`` after every durable batch; it costs a clock read until
a check is due. Retention (``log.retention_ms`` / ``retention_bytes``) is checked every
``RETENTION_CHECK_S``, at most ``RETENTION_SLICE`` partitions at a time, so a sweep of
thousands of partitions never stalls an append; compaction runs every
``compaction_interval_ms`` over the compacted topics (all topics with
``compact_all_topics``, each marked compacted in its metadata before its first rewrite, so
readers take the gaps compaction leaves at a segment's end for what they are, not for a
truncated file). Topics that keep their history (``history``) are never touched.

Scheduled compaction is never in the append: it reads whole partitions, and a capture
waiting on it stalled for seconds (``make soak``'s lag spikes every interval). A thread of
its own drives a child process that does the reading (``compaction_child``: the capture
keeps its interpreter lock and its memory), one partition at a time. It rewrites closed
segments only; retention leaves the partition being compacted alone until it is done (a
segment removed under a rewrite would come back). ``compact`` (``cdc log compact``, tests)
compacts in the calling thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from ..history import keeps_history
from ..records import TopicPartition
from .compaction import CompactionResult, compact_partition
from .compaction_child import CompactionChild
from .directory import FileLogSettings
from .retention import apply_retention
from .topics import TopicMeta, read_meta, write_meta
from .writer import PartitionWriter

log = logging.getLogger(__name__)

RETENTION_CHECK_S = 30.0  # every partition written is checked this often
RETENTION_SLICE = 256  # partitions checked at once

Writers = Mapping[TopicPartition, PartitionWriter]


class Compactor(Protocol):
    """Compacts partitions one at a time (``compact_partition``'s arguments), then ends."""

    @property
    def alive(self) -> bool:
        """False once it cannot compact any more (a child process that ended)."""

    def compact(self, directory: Path, topic: str, partition: int, *,
                delete_retention_ms: int, min_dirty_ratio: float) -> CompactionResult: ...

    def close(self) -> None: ...


class InThisThread:
    """A ``Compactor`` that compacts in the calling thread."""

    alive = True

    def compact(self, directory: Path, topic: str, partition: int, *,
                delete_retention_ms: int, min_dirty_ratio: float) -> CompactionResult:
        return compact_partition(directory, topic, partition,
                                 delete_retention_ms=delete_retention_ms,
                                 min_dirty_ratio=min_dirty_ratio)

    def close(self) -> None:
        pass


class StartedOnFirstUse:
    """A ``Compactor`` that starts the real one (a child process) only when a partition is
    to be compacted, and starts it again after it ended."""

    alive = True

    def __init__(self, start: Callable[[], Compactor]) -> None:
        self._start = start
        self._compactor: Compactor | None = None

    def compact(self, directory: Path, topic: str, partition: int, *,
                delete_retention_ms: int, min_dirty_ratio: float) -> CompactionResult:
        if self._compactor is not None and not self._compactor.alive:
            self.close()
        if self._compactor is None:
            self._compactor = self._start()
        return self._compactor.compact(directory, topic, partition,
                                       delete_retention_ms=delete_retention_ms,
                                       min_dirty_ratio=min_dirty_ratio)

    def close(self) -> None:
        if self._compactor is not None:
            compactor, self._compactor = self._compactor, None
            compactor.close()


BACKGROUND_COMPACTOR: Callable[[], Compactor] = CompactionChild
"""What a scheduled round compacts with (a test may compact in the thread instead)."""


class Housekeeping:
    """The retention and compaction schedule of one producer's partitions."""

    def __init__(self, root: Path, settings: FileLogSettings, *, compaction: bool = True,
                 retention_check_s: float = RETENTION_CHECK_S) -> None:
        self._root = root
        self._settings = settings
        self._compaction = compaction
        self._retention_check_s = retention_check_s
        now = time.monotonic()
        self._next_retention = now + retention_check_s
        self._next_compaction = now + settings.compaction_interval_ms / 1000
        self._cursor = 0
        self._lock = threading.Lock()
        self._compacting: Path | None = None  # the partition being compacted
        self._background: threading.Thread | None = None
        self._stopping = threading.Event()

    def after_append(self, writers: Writers) -> None:
        """Retention of the next slice of ``writers``, and compaction, when due."""
        now = time.monotonic()
        if now >= self._next_retention:
            self.enforce_retention(writers, max_partitions=RETENTION_SLICE)
        if self._compaction and now >= self._next_compaction and not self.compacting:
            self._next_compaction = now + self._settings.compaction_interval_ms / 1000
            partitions = [(tp, w.directory) for tp, w in writers.items()]
            self._background = threading.Thread(
                target=self._compact_in_background, args=(partitions,),
                name="log compaction", daemon=True)
            self._background.start()

    @property
    def compacting(self) -> bool:
        """True while a scheduled compaction runs in the background."""
        return self._background is not None and self._background.is_alive()

    def stop(self) -> None:
        """Stop a background compaction after the partition in hand, and wait for it."""
        self._stopping.set()
        if self._background is not None:
            self._background.join()

    def enforce_retention(self, writers: Writers, *, max_partitions: int | None = None) -> int:
        """Apply the log's retention to ``writers``' partitions (all of them, or the next
        ``max_partitions`` in turn); segments removed."""
        settings = self._settings
        kept = [w for tp, w in writers.items() if not keeps_history(tp.topic)]
        if max_partitions is None or max_partitions >= len(kept):
            self._next_retention = time.monotonic() + self._retention_check_s
            chosen = kept
        else:  # a slice per check: the whole sweep still takes one check interval
            self._next_retention = time.monotonic() + (
                self._retention_check_s * max_partitions / len(kept))
            start = self._cursor % len(kept)
            chosen = kept[start:start + max_partitions]
            self._cursor = start + max_partitions
        if settings.retention_ms is None and settings.retention_bytes is None:
            return 0
        removed = 0
        for writer in chosen:
            with self._lock:  # not the partition being compacted: checked next time
                if writer.directory == self._compacting:
                    continue
                removed += apply_retention(writer.directory, retention_ms=settings.retention_ms,
                                           retention_bytes=settings.retention_bytes)
        return removed

    def compact(self, writers: Writers, *, min_dirty_ratio: float | None = None) -> int:
        """Compact the compacted topics' partitions among ``writers`` now, in this thread;
        records removed."""
        self._next_compaction = time.monotonic() + self._settings.compaction_interval_ms / 1000
        if self._background is not None:
            self._background.join()  # never two compactions of a partition at once
        return self._compact_partitions([(tp, w.directory) for tp, w in writers.items()],
                                        min_dirty_ratio, InThisThread())

    def _compact_in_background(self, partitions: list[tuple[TopicPartition, Path]]) -> None:
        compactor = StartedOnFirstUse(BACKGROUND_COMPACTOR)
        try:
            self._compact_partitions(partitions, None, compactor)
        finally:
            compactor.close()

    def _compact_partitions(self, partitions: list[tuple[TopicPartition, Path]],
                            min_dirty_ratio: float | None, compactor: Compactor) -> int:
        settings = self._settings
        ratio = settings.min_dirty_ratio if min_dirty_ratio is None else min_dirty_ratio
        removed = 0
        for tp, directory in partitions:
            if self._stopping.is_set():
                break
            meta = read_meta(self._root, tp.topic)
            if meta is not None and meta.compacted:
                pass
            elif not settings.compact_all_topics or keeps_history(tp.topic):
                continue
            elif meta is not None:
                write_meta(self._root, tp.topic, TopicMeta(meta.partitions, compacted=True))
            with self._lock:
                self._compacting = directory
            try:
                removed += compactor.compact(directory, tp.topic, tp.partition,
                                             delete_retention_ms=settings.delete_retention_ms,
                                             min_dirty_ratio=ratio).records_removed
            except Exception:  # a background run must not die silently: said, retried later
                if threading.current_thread() is not self._background:
                    raise
                log.exception("compaction of %s[%d] failed; retried at the next interval",
                              tp.topic, tp.partition)
            finally:
                with self._lock:
                    self._compacting = None
        return removed
