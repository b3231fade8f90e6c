"""Keeping freed memory for the next batch instead of handing it back to the kernel.

The per-batch buffers of the hot paths (a partition's encoded lines, the bytes handed to
``os.writev``, a COPY chunk's records) are a few hundred kilobytes to a few megabytes,
allocated and freed again for every batch. glibc's defaults serve such sizes with
``mmap`` (above 128 KiB) and give freed memory at the top of the heap back to the kernel
(above 128 KiB), so every batch faults its pages in again. Measured: page faults were
~40 % of a profile of the log's batch encoder, which took 288 ns a record with glibc's
defaults and 150 ns with the thresholds below; a churn of such buffers faults 14 times
less (``tests/unit/test_memory.py``).

``keep_freed_memory`` raises both thresholds for the process: allocations below
``MMAP_THRESHOLD`` come from the heap, and up to ``TRIM_THRESHOLD`` of free memory at
its top is kept for reuse. The cost is that much resident memory held after a peak,
bounded. It changes nothing on a C library other than glibc (``mallopt`` missing).

Freed memory *inside* the heap is another matter: glibc keeps it for good whenever a
live block sits above it, and a long-running process's heap fragments that way (a
compaction's key map, a migration's re-read of a table, a large transaction's rows all
freed between live ones). Measured: a partition of 600,000 records appended then
compacted left a process at 950 MB resident, all of it free heap; ``malloc_trim(0)``
brought it back to 32 MB. ``release_free_memory_periodically`` hands such pages back
every ``RELEASE_INTERVAL_S`` in the long-running commands (``cdc run``, ``capture``,
``connect``); the hot paths' buffers fault in again at most once per interval.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import threading
import time

log = logging.getLogger(__name__)

__all__ = ["MMAP_THRESHOLD", "RELEASE_INTERVAL_S", "TRIM_THRESHOLD", "YOUNG_COLLECTION",
           "keep_freed_memory", "release_free_memory", "release_free_memory_periodically",
           "spare_the_cycle_collector"]

MMAP_THRESHOLD = 16 * 1024**2  # glibc's largest dynamic threshold is 32 MiB on 64-bit
TRIM_THRESHOLD = 64 * 1024**2
YOUNG_COLLECTION = 20_000  # container allocations between young collections (CPython: 700)
_M_TRIM_THRESHOLD = -1  # <malloc.h>
_M_MMAP_THRESHOLD = -3
RELEASE_INTERVAL_S = 60.0

_applied = False
_releasing: threading.Thread | None = None


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds for this process (once); False where the C
    library has no ``mallopt`` (musl, macOS) or refuses the values."""
    global _applied
    if _applied:
        return True
    try:
        mallopt = _libc().mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    _applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                    and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if not _applied:
        log.debug("mallopt refused the thresholds; freed memory goes back to the kernel")
    return _applied


def release_free_memory() -> bool:
    """Hand the heap's free pages back to the kernel now (glibc's ``malloc_trim(0)``);
    False where the C library has none (musl, macOS) or nothing was released."""
    try:
        trim = _libc().malloc_trim
    except (OSError, AttributeError, TypeError):
        return False
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    return bool(trim(0))


def release_free_memory_periodically(interval_s: float = RELEASE_INTERVAL_S
                                     ) -> threading.Thread:
    """A daemon thread calling ``release_free_memory`` every ``interval_s`` (one per
    process: later calls return the first)."""
    global _releasing
    if _releasing is not None and _releasing.is_alive():
        return _releasing

    def release() -> None:
        while True:
            time.sleep(interval_s)
            release_free_memory()

    _releasing = threading.Thread(target=release, name="memory-release", daemon=True)
    _releasing.start()
    return _releasing


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c"))


def spare_the_cycle_collector() -> None:
    """For a process that streams batches: freeze what is alive now (modules, the
    configuration) out of the cyclic garbage collector, and collect the youngest
    generation every ``YOUNG_COLLECTION`` container allocations instead of 700.

    A batch's rows and records (tens of thousands of dicts) then die before they are
    promoted to the oldest generation, whose collections walk every container alive (a
    joined view's cached rows): measured, a joined view's initial load spent ~10 % of its
    time in such collections. Reference counting still frees everything at once; only
    cycles wait a little longer."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION, middle, oldest)
