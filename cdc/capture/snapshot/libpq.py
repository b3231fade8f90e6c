"""Draining a COPY's rows from libpq in the native core (``CopyDrain``,
``native/src/python/copy_drain.rs``): one call per chunk of rows instead of one Python
call per row, the GIL released meanwhile.

The native core calls the very libpq psycopg uses: the one loaded in this process (its
path found in ``/proc/self/maps``), in which it looks ``PQgetCopyData`` and ``PQfreemem``
up itself after checking that its ``PQlibVersion`` is ``psycopg.pq.version()``. Anywhere
that cannot be established (not Linux, two libpq loaded, another version)
``copy_drain`` is None and the COPY is read row by row through ``psycopg.pq``.
"""

from __future__ import annotations

import functools
import logging
import os

from psycopg import pq

from cdc.native import CORE

log = logging.getLogger(__name__)


@functools.cache
def _loaded_libpq() -> str | None:
    """The path of the one libpq mapped into this process, or None (none, or several)."""
    found: set[str] = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:  # address perms offset device inode [path]
                fields = line.split(None, 5)
                name = os.path.basename(fields[5].strip()) if len(fields) == 6 else ""
                if name.startswith("libpq") and ".so" in name:
                    found.add(os.path.realpath(fields[5].strip()))
    except OSError:
        return None
    return found.pop() if len(found) == 1 else None


def copy_drain(pgconn: pq.abc.PGconn) -> CORE.CopyDrain | None:
    """A native drain of ``pgconn``'s COPY OUT (the connection used by nobody else until
    the COPY ends), or None: read it row by row."""
    path = _loaded_libpq()
    if path is None:
        return None
    try:
        return CORE.CopyDrain(pgconn, path, pq.version())
    except (TypeError, ValueError) as exc:
        _refused(str(exc))
        return None


@functools.cache
def _refused(reason: str) -> None:
    """Say once why COPY is read row by row in this process."""
    log.info("reading COPY row by row (the native drain cannot use this libpq: %s)", reason)
