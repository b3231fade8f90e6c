"""What the log says of a slot's initial snapshot, and finishing an interrupted one.

An initial snapshot is interrupted when the process dies (or the source fails) between
its ``started`` and ``completed`` records. The slot is kept: its confirmed position is
still the consistent point (streaming never began), so every change since is still in
it. The tables recorded as read stay read; the others are requested as incremental
snapshots, read in key chunks between watermarks while streaming — their rows land at
the watermarks' positions, above everything already in the log, and a row deleted
meanwhile gets its ``d`` from the stream after any ``r`` of the first attempt.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cdc.log import Record

from ..lsn import parse_lsn
from .incremental_log import TableSnapshot

RESUME_CHUNK_ROWS = 5000


@dataclass
class InitialSnapshot:
    """One slot's initial snapshot as recorded (the latest attempt)."""

    state: str | None = None  # "started", "completed", or None: never taken here
    consistent_point: int = 0
    tables: list[str] | None = None  # what it was to read (None: an older record)
    read: set[str] = field(default_factory=set)


def initial_snapshot(records: Iterable[dict[str, Any]], slot: str) -> InitialSnapshot:
    """The latest initial snapshot of ``slot`` in the snapshots topic's records (its state
    records share a key, so they are in order; the tables read are matched to it by
    consistent point, as they may sit on other partitions)."""
    found = InitialSnapshot()
    read: dict[int, set[str]] = {}
    for record in records:
        if record.get("slot") != slot:
            continue
        point = parse_lsn(record.get("consistent_point") or "0/0")
        kind = record.get("kind")
        if kind == "initial_tables":
            read.setdefault(point, set()).update(str(t) for t in record.get("tables") or ())
        elif kind is None:
            state = str(record.get("state", "completed"))
            if state == "started":  # a new attempt (a new slot)
                tables = record.get("tables")
                found = InitialSnapshot(state, point, [str(t) for t in tables]
                                        if tables is not None else None)
            else:
                found.state = state
    found.read = read.get(found.consistent_point, set())
    return found


def tables_to_stream(snapshot: InitialSnapshot, published: list[str],
                     active: Iterable[str]) -> list[str]:
    """The tables an interrupted snapshot did not read, still published, and not already
    requested as incremental snapshots (``active``)."""
    present, running = set(published), set(active)
    planned = snapshot.tables if snapshot.tables is not None else published
    return [t for t in planned
            if t in present and t not in snapshot.read and t not in running]


def request_records(prefix: str, tables: Iterable[str]) -> list[Record]:
    """Incremental-snapshot requests for ``tables`` (performed once streaming starts)."""
    return [TableSnapshot(t, "requested", "0/0", RESUME_CHUNK_ROWS).record(prefix)
            for t in tables]
