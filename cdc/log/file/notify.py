"""Wake readers when a partition grows: doorbells under one inotify watch per log.

A writer that made an append durable "rings" the partition's doorbell: it touches
``<root>/_appends/<topic dir>~<partition>`` (and ``.topics`` after creating a topic).
A consumer watches that one directory with inotify and learns from the event names
exactly which partitions have new data, so it reads only those, across processes and
whatever the number of topics. It sleeps in ``selectors`` (poll; never ``select()``,
which fails on descriptors above 1023). Without inotify it polls gently and treats every
partition as changed. An overflowing event queue also means "anything may have changed".
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import selectors
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from .names import topic_dir_name

DOORBELLS_DIR = "_appends"
TOPICS_BELL = ".topics"
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_IN_MODIFY = 0x2
_IN_ATTRIB = 0x4
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_Q_OVERFLOW = 0x4000
_MASK = _IN_MODIFY | _IN_ATTRIB | _IN_CREATE | _IN_MOVED_TO | _IN_DELETE
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then the name, NUL-padded
_FALLBACK_POLL_S = 0.2
_SELECTOR: type[selectors.BaseSelector] = getattr(selectors, "PollSelector",
                                                  selectors.DefaultSelector)


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


def doorbells_dir(root: Path) -> Path:
    """The directory of a log's doorbells (the one directory consumers watch)."""
    return root / DOORBELLS_DIR


def doorbell_name(topic: str, partition: int) -> str:
    """The doorbell of one partition."""
    return f"{topic_dir_name(topic)}~{partition}"


def doorbell_path(root: Path, topic: str, partition: int) -> str:
    """The file of one partition's doorbell (for ``ring_path``)."""
    return os.path.join(root, DOORBELLS_DIR, doorbell_name(topic, partition))


def ring(root: Path, name: str) -> None:
    """Tell watchers that ``name`` changed (a partition's doorbell, or ``TOPICS_BELL``)."""
    ring_path(os.path.join(root, DOORBELLS_DIR, name))


def ring_path(path: str) -> None:
    """Ring the doorbell at ``path`` (created, with its directory, when missing)."""
    try:
        os.utime(path)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))


@dataclass(slots=True)
class Changes:
    """What changed since the last drain: entry names per watched directory."""

    names: dict[Path, set[str]] = field(default_factory=dict)
    everything: bool = False  # no inotify, or events were lost: assume all changed

    def in_dir(self, directory: Path) -> set[str]:
        """Names that changed in ``directory``."""
        return self.names.get(directory, set())


class AppendWatcher:
    """Waits for changes in a few directories and says which entries changed."""

    def __init__(self) -> None:
        self._fd = -1
        self._dirs: dict[int, Path] = {}
        self._selector: selectors.BaseSelector | None = None
        if _LIBC is not None:
            fd = _LIBC.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            if fd >= 0:
                self._fd = fd
                self._selector = _SELECTOR()
                self._selector.register(fd, selectors.EVENT_READ)

    @property
    def uses_inotify(self) -> bool:
        return self._fd >= 0

    def watch(self, directory: Path) -> None:
        """Report writes, new and touched entries of ``directory`` (created if missing)."""
        if directory in self._dirs.values() or self._fd < 0 or _LIBC is None:
            return
        directory.mkdir(parents=True, exist_ok=True)
        wd = _LIBC.inotify_add_watch(self._fd, os.fsencode(directory), _MASK)
        if wd >= 0:
            self._dirs[wd] = directory

    def wait(self, timeout: float) -> None:
        """Sleep until a watched directory changes or ``timeout`` s pass (changes stay
        pending for ``drain``)."""
        if timeout <= 0:
            return
        if self._selector is None:
            time.sleep(min(timeout, _FALLBACK_POLL_S))
            return
        self._selector.select(timeout)

    def drain(self) -> Changes:
        """What changed since the last call (call before reading, so nothing is missed)."""
        changes = Changes(everything=self._fd < 0)
        if self._fd < 0:
            return changes
        with contextlib.suppress(BlockingIOError):
            while data := os.read(self._fd, 1 << 16):
                self._parse(data, changes)
        return changes

    def _parse(self, data: bytes, changes: Changes) -> None:
        pos = 0
        while pos + _EVENT.size <= len(data):
            wd, mask, _, length = _EVENT.unpack_from(data, pos)
            name = data[pos + _EVENT.size:pos + _EVENT.size + length].rstrip(b"\0")
            pos += _EVENT.size + length
            if mask & _IN_Q_OVERFLOW:
                changes.everything = True
                continue
            directory = self._dirs.get(wd)
            if directory is not None and name:
                changes.names.setdefault(directory, set()).add(os.fsdecode(name))

    def close(self) -> None:
        """Release the inotify descriptor."""
        if self._selector is not None:
            self._selector.close()
            self._selector = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._dirs.clear()
