"""A row of ``pg_replication_slots``: what the slot and WAL-safety modules share."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SlotState:
    """A row of ``pg_replication_slots`` that matters to the capture."""

    name: str
    plugin: str | None
    database: str | None
    active: bool
    active_pid: int | None
    confirmed_flush_lsn: int | None
    wal_status: str | None
    retained_bytes: int | None
    safe_wal_bytes: int | None = None  # WAL that may still be written before it is lost
