"""Disk spool for streamed (in-progress) transactions, so memory stays bounded.

With ``streaming 'on'`` PostgreSQL sends a large transaction in chunks before it commits.
Each chunk's events go to a file per top-level xid, tagged with their subtransaction
xid; Stream Commit reads them back in order (less the aborted subtransactions), Stream
Abort of the top-level xid deletes the file.
"""

from __future__ import annotations

import contextlib
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .events import PendingEvent

_FRAME = struct.Struct(">IIIIIQ?")


class StreamSpool:
    """The spooled events of every open streamed transaction."""

    def __init__(self, directory: Path | None = None) -> None:
        """Spool into ``directory`` (emptied first: what a killed capture left there is
        resent by PostgreSQL anyway), or a fresh temporary directory."""
        if directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="distributary-spool-"))
        else:
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            self.directory = directory
        self._files: dict[int, BinaryIO] = {}
        self._aborted: dict[int, set[int]] = {}

    def add(self, xid: int, subxid: int, events: list[PendingEvent]) -> None:
        """Spool ``events`` of subtransaction ``subxid`` of transaction ``xid``."""
        out = self._files.get(xid)
        if out is None:
            out = self._files[xid] = (self.directory / f"{xid}.spool").open("w+b")
        for e in events:
            topic = e.topic.encode()
            out.write(_FRAME.pack(subxid, len(topic), len(e.key), len(e.body),
                                  len(e.source_names), e.lsn, e.tombstone))
            out.write(topic + e.key + e.body + e.source_names)

    def abort(self, xid: int, subxid: int) -> None:
        """Forget a whole transaction (``subxid == xid``) or one subtransaction of it."""
        if subxid == xid:
            self._discard(xid)
        else:
            self._aborted.setdefault(xid, set()).add(subxid)

    def commit(self, xid: int) -> Iterator[PendingEvent]:
        """The surviving events of ``xid`` in arrival order; the spool is removed after."""
        source = self._files.get(xid)
        aborted = self._aborted.get(xid, set())
        try:
            if source is None:
                return
            source.flush()
            source.seek(0)
            while header := source.read(_FRAME.size):
                subxid, tl, kl, bl, nl, lsn, tombstone = _FRAME.unpack(header)
                data = source.read(tl + kl + bl + nl)
                if subxid in aborted:
                    continue
                yield PendingEvent(data[:tl].decode(), data[tl:tl + kl],
                                   data[tl + kl:tl + kl + bl], lsn, tombstone,
                                   data[tl + kl + bl:])
        finally:
            self._discard(xid)

    def open_transactions(self) -> int:
        """How many streamed transactions are spooled and not yet ended."""
        return len(self._files)

    def _discard(self, xid: int) -> None:
        out = self._files.pop(xid, None)
        self._aborted.pop(xid, None)
        if out is not None:
            out.close()
            with contextlib.suppress(FileNotFoundError):
                (self.directory / f"{xid}.spool").unlink()

    def close(self) -> None:
        """Drop every spool file."""
        for xid in list(self._files):
            self._discard(xid)
        shutil.rmtree(self.directory, ignore_errors=True)
