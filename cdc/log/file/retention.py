"""Retention: remove a partition's oldest closed segments by age and by total size."""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

from .segments import INDEX_SUFFIX, list_segments, segment_name
from .writer import fsync_dir

log = logging.getLogger(__name__)


def apply_retention(directory: Path, *, retention_ms: int | None, retention_bytes: int | None,
                    now: float | None = None) -> int:
    """Delete closed segments older than ``retention_ms`` (by last write) or beyond
    ``retention_bytes`` in total, oldest first; the active segment always stays.

    Returns the number of segments removed.
    """
    bases = list_segments(directory)
    if len(bases) < 2:
        return 0
    now = time.time() if now is None else now
    sizes, mtimes = {}, {}
    for base in bases:
        stat = (directory / segment_name(base)).stat()
        sizes[base], mtimes[base] = stat.st_size, stat.st_mtime
    total = sum(sizes.values())
    removed = 0
    for base in bases[:-1]:
        too_old = retention_ms is not None and (now - mtimes[base]) * 1000 > retention_ms
        too_big = retention_bytes is not None and total > retention_bytes
        if not (too_old or too_big):
            break
        path = directory / segment_name(base)
        path.unlink()
        with contextlib.suppress(FileNotFoundError):
            path.with_suffix(INDEX_SUFFIX).unlink()
        total -= sizes[base]
        removed += 1
        log.info("retention removed segment %s", path.name,
                 extra={"file": str(path), "reason": "age" if too_old else "size"})
    if removed:
        fsync_dir(directory)
    return removed
