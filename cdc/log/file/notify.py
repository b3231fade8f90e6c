"""Wake readers when a partition grows: Linux inotify, or a gentle poll elsewhere.

Consumers never spin: they sleep in ``select`` on the inotify descriptor until a segment
file in a watched directory is written or created (``tail -f`` semantics across processes).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import select
import time
from pathlib import Path

_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_IN_MODIFY = 0x2
_IN_CREATE = 0x100
_IN_MOVED_TO = 0x80
_IN_DELETE = 0x200
_MASK = _IN_MODIFY | _IN_CREATE | _IN_MOVED_TO | _IN_DELETE
_FALLBACK_POLL_S = 0.2


def _load_libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _load_libc()


class AppendWatcher:
    """Waits for changes in a set of directories."""

    def __init__(self) -> None:
        self._fd = -1
        self._watched: set[Path] = set()
        if _LIBC is not None:
            fd = _LIBC.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            self._fd = fd if fd >= 0 else -1

    @property
    def uses_inotify(self) -> bool:
        return self._fd >= 0

    def watch(self, directory: Path) -> None:
        """Wake on writes and new files in ``directory`` (ignored if it does not exist)."""
        if directory in self._watched or self._fd < 0 or _LIBC is None:
            return
        if _LIBC.inotify_add_watch(self._fd, os.fsencode(directory), _MASK) >= 0:
            self._watched.add(directory)

    def wait(self, timeout: float) -> None:
        """Sleep until a watched directory changes or ``timeout`` s pass."""
        if timeout <= 0:
            return
        if self._fd < 0:
            time.sleep(min(timeout, _FALLBACK_POLL_S))
            return
        readable, _, _ = select.select([self._fd], [], [], timeout)
        if readable:
            self.drain()

    def drain(self) -> None:
        """Forget pending notifications (called before reading, so none is missed)."""
        if self._fd < 0:
            return
        with contextlib.suppress(BlockingIOError):
            while os.read(self._fd, 65536):
                pass

    def close(self) -> None:
        """Release the inotify descriptor."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._watched.clear()
