"""Stopping a long-running command on SIGTERM or SIGINT, without a deadlock.

A Python signal handler runs in the main thread between two bytecodes — possibly while
that thread holds a lock. ``threading.Event.wait`` holds the event's own lock for a few
bytecodes around every wait, and under GIL contention (busy threads, a loaded machine) a
signal that arrives meanwhile is handled right there: a handler calling ``Event.set``
then waits forever for a lock its own thread holds, and the process ignores every later
SIGTERM (measured: 2 of 892 signals handled with the lock held, three busy threads).

So the handler here takes no lock: it writes a byte to a pipe, and a relay thread reading
that pipe sets the event, from outside the signal's context. One pipe and one relay serve
the whole process; every ``stop_on_signals`` call gets a fresh event.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from types import FrameType

__all__ = ["stop_on_signals"]

_lock = threading.Lock()
_wakeup_fd: int | None = None
_current: threading.Event | None = None


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (the command then stops cleanly); call it from
    the main thread."""
    global _current
    stop = threading.Event()
    with _lock:
        write_fd = _start_relay() if _wakeup_fd is None else _wakeup_fd
        _current = stop

    def _handler(signum: int, frame: FrameType | None) -> None:
        # non-blocking, no lock taken; a full pipe holds stops enough already
        with contextlib.suppress(BlockingIOError):
            os.write(write_fd, b"\0")

    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)
    return stop


def _start_relay() -> int:
    global _wakeup_fd
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    threading.Thread(target=_relay, args=(read_fd,), name="stop-on-signal",
                     daemon=True).start()
    _wakeup_fd = write_fd
    return write_fd


def _relay(read_fd: int) -> None:
    while os.read(read_fd, 512):
        with _lock:
            event = _current
        if event is not None:
            event.set()
