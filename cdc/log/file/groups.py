"""Consumer groups across processes on one machine: members, leases, locks, offsets.

    <root>/_groups/<group>/members/<member>   a member's lease: flock held while it lives,
                                              mtime refreshed by its heartbeat thread
    <root>/_groups/<group>/locks/partitions.lock  a byte-range lock per partition, held
                                              by its current owner (``locks.RangeLocks``)
    <root>/_groups/<group>/offsets.log        the committed offsets (``offsets``)
    <root>/_groups/<group>/policy.json        the group's backpressure policy

A member is live while its lease file is locked (a killed process loses the lock at
once) and its heartbeat is fresher than the session timeout (a hung one loses it).
Partitions are dealt out round-robin over the sorted live members; a member reads a
partition only while it holds that partition's lock, so two members never read one
partition at the same time, and it commits offsets only for partitions it holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
import uuid
from pathlib import Path

from ..records import Backpressure, BackpressurePolicy, TopicPartition
from .locks import RangeLocks

HEARTBEAT_S = 1.0
SESSION_TIMEOUT_S = 10.0


def group_dir(root: Path, group: str) -> Path:
    """Where a group's state lives."""
    return root / "_groups" / group


def _try_lock(path: Path, *, create: bool = True) -> int | None:
    """Open and exclusively flock ``path``; the fd, or None when someone holds it
    (or, with ``create=False``, when it no longer exists)."""
    try:
        fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def read_policy(root: Path, group: str) -> Backpressure:
    """A group's backpressure policy (``buffer`` when it never said)."""
    try:
        data = json.loads((group_dir(root, group) / "policy.json").read_text())
        return Backpressure(BackpressurePolicy(data["policy"]), int(data["max_lag"]))
    except (FileNotFoundError, ValueError, KeyError):
        return Backpressure()


class GroupMember:
    """This process's membership in one group: lease, heartbeat, partition locks."""

    def __init__(self, root: Path, group: str, backpressure: Backpressure, *,
                 session_timeout_s: float = SESSION_TIMEOUT_S) -> None:
        """``session_timeout_s``: how long another member's lease may go without a
        heartbeat before it no longer counts as live (``log.group_session_timeout``)."""
        self.group = group
        self._session_timeout_s = session_timeout_s
        self.directory = group_dir(root, group)
        self.members_dir = self.directory / "members"
        self.locks_dir = self.directory / "locks"
        for d in (self.members_dir, self.locks_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.member_id = f"{int(time.time() * 1000):013d}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._lease_path = self.members_dir / self.member_id
        # lock under a hidden name first, then rename: nobody sees an unlocked lease
        hidden = self.members_dir / f".{self.member_id}"
        lease = _try_lock(hidden)
        assert lease is not None, "a fresh lease file cannot be locked by anyone else"
        os.replace(hidden, self._lease_path)
        self._lease_fd = lease
        self._locks = RangeLocks(self.locks_dir / "partitions.lock")
        self._owned: set[TopicPartition] = set()
        self._stop = threading.Event()
        self._write_policy(backpressure)
        self._heartbeat = threading.Thread(target=self._beat, name=f"heartbeat-{group}",
                                           daemon=True)
        self._heartbeat.start()

    def _write_policy(self, backpressure: Backpressure) -> None:
        path = self.directory / "policy.json"
        tmp = path.with_name(f".policy.{self.member_id}.tmp")  # members may share a process
        tmp.write_text(json.dumps({"policy": backpressure.policy.value,
                                   "max_lag": backpressure.max_lag}))
        os.replace(tmp, path)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with contextlib.suppress(FileNotFoundError):
                os.utime(self._lease_path)

    def live_members(self) -> list[str]:
        """Ids of the live members, sorted; leases of dead ones are removed."""
        live = []
        now = time.time()
        for path in self.members_dir.iterdir():
            if path.name.startswith("."):
                continue
            if path.name == self.member_id:
                live.append(path.name)
                continue
            fd = _try_lock(path, create=False)
            if fd is not None:  # nobody holds it: that member is gone
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                os.close(fd)
                continue
            if not path.exists():
                continue
            with contextlib.suppress(FileNotFoundError):
                if now - path.stat().st_mtime <= self._session_timeout_s:
                    live.append(path.name)
        return sorted(live)

    def desired(self, partitions: list[TopicPartition],
                members: list[str] | None = None) -> set[TopicPartition]:
        """This member's share of ``partitions`` (round-robin over the live ``members``,
        read now when not given)."""
        members = self.live_members() if members is None else members
        me = members.index(self.member_id)
        ordered = sorted(partitions, key=lambda tp: (tp.topic, tp.partition))
        return {tp for i, tp in enumerate(ordered) if i % len(members) == me}

    def acquire(self, tp: TopicPartition) -> bool:
        """Take the lock of ``tp``; False while its previous owner still holds it."""
        if tp in self._owned:
            return True
        if not self._locks.try_lock(f"{tp.topic}\0{tp.partition}"):
            return False
        self._owned.add(tp)
        return True

    def release(self, tp: TopicPartition) -> None:
        """Give ``tp`` up."""
        if tp in self._owned:
            self._owned.discard(tp)
            self._locks.unlock(f"{tp.topic}\0{tp.partition}")

    def owns(self, tp: TopicPartition) -> bool:
        """True while this member holds ``tp``."""
        return tp in self._owned

    def leave(self) -> None:
        """Release every partition and the lease."""
        self._stop.set()
        self._owned.clear()
        self._locks.close()
        with contextlib.suppress(FileNotFoundError):
            self._lease_path.unlink()
        os.close(self._lease_fd)
        self._heartbeat.join(timeout=5)
