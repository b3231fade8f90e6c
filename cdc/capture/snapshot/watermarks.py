"""The pure part of the watermark method: which rows of a chunk the stream supersedes.

A chunk is read inside a snapshot ``S`` (``pg_current_snapshot()``), between a low and a
high watermark written to the WAL. Every transaction the stream delivers before the high
watermark is either visible in ``S`` — then the chunk's row already holds its effect,
and the row, emitted at the high watermark's position, comes after it — or invisible in
``S``: then the chunk's row is older than the streamed change, so the row is dropped and
the streamed change stands. Deciding by visibility in ``S`` (not only by "between the
watermarks") also covers a transaction whose commit record precedes the low watermark
but which was not yet visible when ``S`` was taken.
"""

from __future__ import annotations

from dataclasses import dataclass, field

XID_MASK = 0xFFFFFFFF
ALL_KEYS = b"{}"  # a truncate's key: every row of the table


def _precedes(a: int, b: int) -> bool:
    """``a < b`` for 32-bit transaction ids (modulo 2^32, as PostgreSQL compares)."""
    return ((a - b) & XID_MASK) >= 0x80000000


@dataclass(frozen=True, slots=True)
class SnapshotXids:
    """A ``pg_snapshot``: transactions below ``xmin`` are done, ``xip`` were in progress,
    ``xmax`` and above had not started (32-bit xids, as pgoutput sends them)."""

    xmin: int
    xmax: int
    xip: frozenset[int]

    @classmethod
    def parse(cls, text: str) -> SnapshotXids:
        """``'xmin:xmax:xip,xip'`` (``pg_current_snapshot()::text``)."""
        xmin, xmax, xip = text.split(":")
        return cls(int(xmin) & XID_MASK, int(xmax) & XID_MASK,
                   frozenset(int(x) & XID_MASK for x in xip.split(",") if x))

    def visible(self, xid: int) -> bool:
        """True when the committed transaction ``xid``'s changes are visible in this
        snapshot."""
        return xid not in self.xip and _precedes(xid, self.xmax)


@dataclass(slots=True)
class KeyTracker:
    """The keys each streamed transaction touched in a table being snapshotted, kept
    until a chunk's snapshot shows the transaction as visible (later snapshots see it too)."""

    touched: dict[int, set[bytes]] = field(default_factory=dict)

    def add(self, xid: int, key: bytes) -> None:
        """Transaction ``xid`` wrote ``key`` (``ALL_KEYS`` for a truncate)."""
        keys = self.touched.get(xid)
        if keys is None:
            self.touched[xid] = {key}
        else:
            keys.add(key)

    def superseded(self, snapshot: SnapshotXids) -> set[bytes]:
        """The keys written by transactions invisible in ``snapshot``; forget the rest."""
        dropped: set[bytes] = set()
        for xid in list(self.touched):
            if snapshot.visible(xid):
                del self.touched[xid]
            else:
                dropped |= self.touched[xid]
        return dropped


def surviving(keys: list[bytes], dropped: set[bytes]) -> list[int]:
    """Indexes of the chunk rows (by event key) the stream did not supersede."""
    if ALL_KEYS in dropped:
        return []
    return [i for i, key in enumerate(keys) if key not in dropped]
