"""What the file log's producers and consumers use of a ``FileLog``: its directory, its
settings and its pool of open files (``LogDirectory``), so they need not import it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .groups import SESSION_TIMEOUT_S
from .handles import HandlePool


@dataclass(frozen=True, slots=True)
class FileLogSettings:
    """Tunables of the file backend."""

    default_partitions: int = 3
    segment_bytes: int = 64 << 20
    segment_ms: int = 24 * 3600 * 1000
    fsync: bool = True
    retention_ms: int | None = None
    retention_bytes: int | None = None
    compact_all_topics: bool = False
    compaction_interval_ms: int = 10 * 60 * 1000
    min_dirty_ratio: float = 0.5
    delete_retention_ms: int = 24 * 3600 * 1000
    open_files: int = 128  # segment files open at once, all topics together (LRU pool)
    checkpoint_bytes: int | None = None  # a journal this big is checkpointed (None: 64 MiB)
    session_timeout_s: float = SESSION_TIMEOUT_S  # a group member silent this long is dead


class LogDirectory(Protocol):
    """A log directory as its producers and consumers see it (``FileLog`` is one)."""

    @property
    def root(self) -> Path: ...

    @property
    def settings(self) -> FileLogSettings: ...

    @property
    def handles(self) -> HandlePool: ...
