"""Draining a COPY's rows from libpq in the native core (``CopyDrain``,
``native/src/python/copy_drain.rs``): one call per chunk of rows instead of one Python
call per row, the GIL released meanwhile.

The native core calls the very libpq psycopg uses: the one loaded in this process (found
in ``/proc/self/maps``; its ``PQlibVersion`` must be ``psycopg.pq.version()``), whose
``PQgetCopyData`` and ``PQfreemem`` it is handed by address. Anywhere that cannot be
established (not Linux, two libpq loaded) ``copy_drain`` is None and
the COPY is read row by row through ``psycopg.pq``.
"""

from __future__ import annotations

import ctypes
import functools
import os

from psycopg import pq

from cdc.native import CORE


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


@functools.cache
def copy_functions() -> tuple[int, int] | None:
    """The addresses of ``PQgetCopyData`` and ``PQfreemem`` in psycopg's libpq, or None
    when that library cannot be told for sure."""
    path = _loaded_libpq()
    if path is None:
        return None
    try:
        library = ctypes.CDLL(path)  # already loaded: the same handle, the same library
        library.PQlibVersion.restype = ctypes.c_int
        if library.PQlibVersion() != pq.version():
            return None
        get_copy_data = ctypes.cast(library.PQgetCopyData, ctypes.c_void_p).value
        free_mem = ctypes.cast(library.PQfreemem, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None
    if not get_copy_data or not free_mem:
        return None
    return get_copy_data, free_mem


def copy_drain(pgconn: pq.abc.PGconn) -> CORE.CopyDrain | None:
    """A native drain of ``pgconn``'s COPY OUT (the connection used by nobody else until
    the COPY ends), or None: read it row by row."""
    functions = copy_functions()
    pointer: int | None = getattr(pgconn, "pgconn_ptr", None)  # not in pq.abc.PGconn
    if functions is None or not pointer:
        return None
    return CORE.CopyDrain(pointer, *functions)
