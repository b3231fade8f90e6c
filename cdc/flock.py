"""Exclusive ``flock``s on local files that a process waits a while for: a process on its
way out (its ``cdc run`` killed, the child stopping cleanly; a service manager starting
``cdc`` again at once) still holds its lock for a moment. The kernel drops a lock when its
holder exits, however it exits."""

from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path

log = logging.getLogger(__name__)

RETRY_S = 0.1


def take_flock(path: Path, wait_s: float, waiting: str) -> int | None:
    """Open ``path`` (made if missing) and lock it exclusively, waiting up to ``wait_s``
    seconds for another holder to let go (``waiting``: logged once when it must wait);
    the open descriptor holding the lock (closing it lets go), or ``None`` when it is
    still held after the wait."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    logged = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                break
        if not logged:
            logged = True
            log.info("%s: waiting up to %.0f s for it to stop", waiting, wait_s)
        time.sleep(RETRY_S)
    os.close(fd)
    return None
