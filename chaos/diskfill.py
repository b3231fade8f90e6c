"""A small filesystem for the log, so the harness can fill the log's disk and free it.

Here the harness runs as root and ``mount -t tmpfs -o size=…`` works, so the log lives
on a tmpfs of a fixed size (no loop device or mkfs needed). Filling it means writing a
filler file until ``ENOSPC``; freeing it means deleting the file. Without root (or
without permission to mount), ``mount`` fails and the harness says so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path

CHUNK = 1 << 20


class DiskFaultUnavailable(RuntimeError):
    """The small filesystem could not be mounted (not root, or no mount permission)."""


class SmallFilesystem:
    """A tmpfs of ``size_bytes`` mounted at ``mountpoint`` for the harness's lifetime."""

    def __init__(self, mountpoint: Path, size_bytes: int) -> None:
        self.mountpoint = mountpoint
        self.size_bytes = size_bytes
        self.filler = mountpoint / "filler"
        self._mounted = False

    def mount(self) -> None:
        """Mount the tmpfs; DiskFaultUnavailable with the reason when that is not allowed."""
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_bytes},mode=0755",
                               "chaos-log", str(self.mountpoint)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise DiskFaultUnavailable(f"cannot mount a tmpfs for the log at {self.mountpoint} "
                                       f"(run as root): {done.stderr.strip()}")
        self._mounted = True

    def unmount(self) -> None:
        """Unmount (lazily if something still holds a file)."""
        if not self._mounted:
            return
        done = subprocess.run(["umount", str(self.mountpoint)], capture_output=True, check=False)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(self.mountpoint)], capture_output=True,
                           check=False)
        self._mounted = False

    def free_bytes(self) -> int:
        stats = os.statvfs(self.mountpoint)
        return stats.f_bavail * stats.f_frsize

    def fill(self) -> int:
        """Write the filler until the filesystem is full; the bytes written."""
        written = 0
        with self.filler.open("ab", buffering=0) as out:
            for size in (CHUNK, 4096, 1):  # to the last byte: nothing left for the log
                block = b"\0" * size
                while True:
                    try:
                        count = out.write(block)
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        break
                    if not count:
                        break
                    written += count
        return written

    def free(self) -> None:
        """Delete the filler."""
        with contextlib.suppress(FileNotFoundError):
            self.filler.unlink()
