"""Processes seen from /proc: a process tree's peak RSS and each process's CPU seconds.

The benchmarks that time ``cdc run`` print where the time went per process (the
supervisor, the capture, each connector, the servers) from these.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of ``pid``, with its children's that ended."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), sum(int(f) for f in fields[11:15]) / TICK


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                parents.setdefault(stat[0], []).append(int(entry))
    tree, pending = [], [root]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending.extend(parents.get(pid, ()))
    return tree


class Sampler(threading.Thread):
    """The peak summed RSS of a process tree, and each process's last CPU seconds."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.peak_mb = 0.0
        self.peaks: dict[int, float] = {}
        self.cpu: dict[int, tuple[str, float]] = {}
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.25):
            self.sample()

    def sample(self) -> None:
        tree = process_tree(self.root)
        rss = {pid: _rss_mb(pid) for pid in tree}
        self.peak_mb = max(self.peak_mb, sum(rss.values()))
        for pid, mb in rss.items():
            self.peaks[pid] = max(self.peaks.get(pid, 0.0), mb)
        for pid in tree:
            stat = _stat(pid)
            if stat is not None:
                name = self.cpu.get(pid, ("", 0.0))[0] or _cmdline(pid)
                self.cpu[pid] = (name, stat[1])

    def stop(self) -> None:
        self._done.set()
        self.join()


def cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its descendants still running."""
    return sum((_stat(p) or (0, 0.0))[1] for p in process_tree(pid))


def server_pid(port: int) -> int | None:
    """The pid listening on TCP ``port`` (from /proc/net/tcp* and the fds)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                parts = line.split()
                if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(parts[9])
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{entry}/fd/{fd}")
                    if link.startswith("socket:[") and link[8:-1] in inodes:
                        return int(entry)
    return None


def role_names(processes: dict[int, tuple[str, float]], root: int) -> dict[int, str]:
    """A short, unique name per process of ``cdc run``'s tree (``Sampler.cpu``): the
    supervisor (``root``), ``capture``, ``connect`` (``connect_<name>`` when run for
    one connector), a number appended to a name seen before."""
    names: dict[int, str] = {}
    for pid, (cmd, _) in sorted(processes.items()):
        role = "supervisor" if pid == root else _role(cmd)
        names[pid] = next(f"{role}{n or ''}" for n in range(len(names) + 1)
                          if f"{role}{n or ''}" not in names.values())
    return names


def _role(cmd: str) -> str:
    words = cmd.split()
    for word in ("capture", "connect", "run"):
        if word in words:
            following = words[words.index(word) + 1: words.index(word) + 2]
            if word == "connect" and following and not following[0].startswith("-"):
                return f"connect_{following[0].replace('-', '_')}"
            return word
    return "child"
