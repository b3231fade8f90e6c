"""Exclusive locks on any number of names through one open file.

Each name is a one-byte range of a lock file, at an offset drawn from the name's hash,
locked with an open-file-description lock (Linux ``F_OFD_SETLK``): like ``flock`` it
belongs to the open file (two handles exclude each other, even in one process) and a
killed process loses it, but a process holds thousands of names with one descriptor.
Where the platform lacks OFD locks, each name falls back to its own ``flock``'d file.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import struct
from pathlib import Path

_OFD_SETLK: int | None = getattr(fcntl, "F_OFD_SETLK", None)
_FLOCK = struct.Struct("hhqqi4x")  # struct flock: type, whence, start, len, pid
_BUSY = (errno.EACCES, errno.EAGAIN)


def _offset(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") >> 2


class RangeLocks:
    """Exclusive, non-blocking locks on names, held through one file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._held: dict[str, int] = {}  # name → fd of its own file (fallback) or -1

    def _open(self) -> int:
        if self._fd < 0:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def holds(self, name: str) -> bool:
        """True while this table holds ``name``."""
        return name in self._held

    def try_lock(self, name: str) -> bool:
        """Take ``name`` if nobody holds it; True when held."""
        if name in self._held:
            return True
        if _OFD_SETLK is None:
            return self._try_flock(name)
        request = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, _offset(name), 1, 0)
        try:
            fcntl.fcntl(self._open(), _OFD_SETLK, request)
        except OSError as exc:
            if exc.errno in _BUSY:
                return False
            raise
        self._held[name] = -1
        return True

    def _try_flock(self, name: str) -> bool:
        directory = self.path.with_name(self.path.name + ".d")
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / f"{_offset(name):x}", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._held[name] = fd
        return True

    def unlock(self, name: str) -> None:
        """Give ``name`` up (nothing when not held)."""
        fd = self._held.pop(name, None)
        if fd is None:
            return
        if fd >= 0:
            os.close(fd)
        elif _OFD_SETLK is not None and self._fd >= 0:
            request = _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, _offset(name), 1, 0)
            fcntl.fcntl(self._fd, _OFD_SETLK, request)

    def close(self) -> None:
        """Release every name and the file."""
        for fd in self._held.values():
            if fd >= 0:
                os.close(fd)
        self._held.clear()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
