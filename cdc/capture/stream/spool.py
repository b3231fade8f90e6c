"""Disk spool for streamed (in-progress) transactions, so memory stays bounded.

With ``streaming 'on'`` PostgreSQL sends a large transaction in chunks before it commits.
Each chunk's events go to a file per top-level xid, tagged with their subtransaction
xid; Stream Commit reads them back in order (less the aborted subtransactions), Stream
Abort of the top-level xid deletes the file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..events import PendingEvent

_FRAME = struct.Struct(">IIIIIQ?")


class StreamSpool:
    """The spooled events of every open streamed transaction."""

    def __init__(self, directory: Path | None = None, *, shared_base: bool = False) -> None:
        """Spool into ``directory`` (emptied first: what a killed capture left there is
        resent by PostgreSQL anyway), or a fresh temporary directory; ``shared_base``: its
        parent is the slot's base directory (``for_process``), removed at ``close`` once
        no process spools in it."""
        self._shared_base = shared_base
        if directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="distributary-spool-"))
        else:
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            self.directory = directory
        self._files: dict[int, BinaryIO] = {}
        self._aborted: dict[int, set[int]] = {}

    @classmethod
    def for_process(cls, base: Path, pid: int | None = None) -> StreamSpool:
        """A spool in ``base/<pid>``: replicas of one capture on one host (same slot, so
        same ``base``) never empty each other's files. Spools of processes no longer
        running are removed first (PostgreSQL resends what they held)."""
        own = os.getpid() if pid is None else pid
        base.mkdir(parents=True, exist_ok=True)
        for entry in base.iterdir():
            if entry.name.isdigit() and int(entry.name) != own and not _running(int(entry.name)):
                shutil.rmtree(entry, ignore_errors=True)
        return cls(base / str(own), shared_base=True)

    def _file(self, xid: int) -> BinaryIO:
        out = self._files.get(xid)
        if out is None:
            out = self._files[xid] = (self.directory / f"{xid}.spool").open("w+b")
        return out

    def add(self, xid: int, subxid: int, events: list[PendingEvent]) -> None:
        """Spool ``events`` of subtransaction ``subxid`` of transaction ``xid``."""
        out = self._file(xid)
        for e in events:
            topic = e.topic.encode()
            out.write(_FRAME.pack(subxid, len(topic), len(e.key), len(e.body),
                                  len(e.source_names), e.lsn, e.tombstone))
            out.write(topic + e.key + e.body + e.source_names)

    def add_frame(self, xid: int, frame: bytes) -> None:
        """Spool one event of transaction ``xid`` already framed as ``add`` frames it (by
        the native core: ``dml_native``)."""
        self._file(xid).write(frame)

    def abort(self, xid: int, subxid: int) -> None:
        """Forget a whole transaction (``subxid == xid``) or one subtransaction of it."""
        if subxid == xid:
            self._discard(xid)
        else:
            self._aborted.setdefault(xid, set()).add(subxid)

    def commit(self, xid: int) -> CommittedSpool:
        """The surviving events of ``xid`` in arrival order; the spool is removed after."""
        return CommittedSpool(self, xid, self._files.get(xid),
                              frozenset(self._aborted.get(xid, ())))

    def open_transactions(self) -> int:
        """How many streamed transactions are spooled and not yet ended."""
        return len(self._files)

    def discard(self, xid: int) -> None:
        """Remove the spool of ``xid``."""
        self._discard(xid)

    def _discard(self, xid: int) -> None:
        out = self._files.pop(xid, None)
        self._aborted.pop(xid, None)
        if out is not None:
            out.close()
            with contextlib.suppress(FileNotFoundError):
                (self.directory / f"{xid}.spool").unlink()

    def close(self) -> None:
        """Drop every spool file, and the slot's base directory when it is left empty (a
        replica's own directory in it keeps it: ``rmdir`` removes only an empty one)."""
        for xid in list(self._files):
            self._discard(xid)
        shutil.rmtree(self.directory, ignore_errors=True)
        if self._shared_base:
            with contextlib.suppress(OSError):
                self.directory.parent.rmdir()


class CommittedSpool(Iterator[PendingEvent]):
    """The events a committed transaction spooled, as they come back: an iterator of
    ``PendingEvent``, less the aborted subtransactions' (the spool file is removed once
    it is exhausted, or at ``close``). A reader of whole chunks of frames (the native
    core, ``dml_native``) takes ``file`` and ``aborted`` instead, then calls ``close``."""

    def __init__(self, spool: StreamSpool, xid: int, file: BinaryIO | None,
                 aborted: frozenset[int]) -> None:
        self.xid = xid
        self.aborted = aborted
        self._spool = spool
        self._file = file
        self._rewound = False

    @property
    def file(self) -> BinaryIO | None:
        """The spool file from its start, or None when nothing was spooled (or it is
        closed)."""
        source = self._file
        if source is not None and not self._rewound:
            source.flush()
            source.seek(0)
            self._rewound = True
        return source

    def __next__(self) -> PendingEvent:
        source = self.file
        while source is not None:
            header = source.read(_FRAME.size)
            if not header:
                break
            subxid, tl, kl, bl, nl, lsn, tombstone = _FRAME.unpack(header)
            data = source.read(tl + kl + bl + nl)
            if subxid in self.aborted:
                continue
            return PendingEvent(data[:tl].decode(), data[tl:tl + kl],
                                data[tl + kl:tl + kl + bl], lsn, tombstone,
                                data[tl + kl + bl:])
        self.close()
        raise StopIteration

    def close(self) -> None:
        """Remove the spool file (every event was read, or none is wanted)."""
        self._file = None
        self._spool.discard(self.xid)


def _running(pid: int) -> bool:
    """True while a process ``pid`` exists (whoever owns it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
