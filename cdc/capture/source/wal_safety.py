"""WAL a slot makes PostgreSQL keep: the limit, how close the slot is to it, and a lost slot.

A slot that falls more than ``max_slot_wal_keep_size`` behind is invalidated at the next
checkpoint (``wal_status = 'lost'``): PostgreSQL removed WAL holding changes the capture
never read, so streaming on would silently skip them. The capture refuses such a slot
with :class:`SlotLostError`; ``cdc capture --recreate-lost-slot`` drops it, creates a new
one and snapshots the tables again. Before that, ``wal_status`` goes ``extended`` →
``unreserved`` and the retained WAL approaches the limit: ``cdc doctor`` and the capture's
log warn from ``WARN_FRACTION`` of the limit on.

A slot the log shows this capture streamed from, but which the server does not have, is
*missing* (:class:`SlotMissingError`): dropped by hand, or a failover to a server the slot
was not synchronised to (before PostgreSQL 17, or without ``source.failover_slot``).
Changes since the log's last position may never reach it; the same flag creates a new
slot and snapshots the tables again, each table's rows preceded by a truncate event. A
promoted standby may be *behind* the log (it never received the old primary's last
WAL); ``advance_wal_past`` first moves its WAL past the log's last position, so the new
slot's positions stay above everything the log holds (invariant 2).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import psycopg

from cdc.errors import SourceError, TerminalError

from ..lsn import format_lsn, parse_lsn
from .slot_state import SlotState

log = logging.getLogger(__name__)

WARN_FRACTION = 0.8
RECREATE_FLAG = "--recreate-lost-slot"
MAX_WAL_SWITCHES = 256  # segments ``advance_wal_past`` may switch before giving up
_UNIT_BYTES = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


class SlotLostError(TerminalError):
    """The slot was invalidated: changes were removed before the capture read them."""

    def __init__(self, slot: str) -> None:
        self.slot = slot
        super().__init__(
            f"replication slot {slot!r} is lost (wal_status=lost): it fell more than "
            "max_slot_wal_keep_size behind and PostgreSQL removed WAL holding changes not yet "
            "captured, so streaming on would miss them. Recover with "
            f"'cdc capture -c <pipeline.yaml> {RECREATE_FLAG}': it drops the slot, creates a "
            "new one and snapshots the tables again (rows deleted meanwhile stay in the sinks "
            "until a rebuild), then streams")


class SlotMissingError(TerminalError):
    """The slot this capture streamed from is gone: changes since ``position`` may be lost."""

    def __init__(self, slot: str, position: str | None) -> None:
        self.slot = slot
        self.position = position
        since = f"since position {position} " if position else ""
        super().__init__(
            f"replication slot {slot!r} is missing: the log shows this capture streamed from "
            "it, but the server has no such slot (it was dropped, or this server is a "
            "promoted standby the slot was not synchronised to: a failover without failover "
            f"slots), so changes {since}may be missing from the log. Recover with "
            f"'cdc capture -c <pipeline.yaml> {RECREATE_FLAG}': it creates a new slot and "
            "snapshots the tables again, each table's rows preceded by a truncate event so "
            "the sinks converge to the server's state, then streams")


def advance_wal_past(conn: psycopg.Connection[Any], lsn: int) -> None:
    """Make the server's WAL insert position pass ``lsn``: a WAL record, then a segment
    switch, until it does (a promoted standby behind the log; needs ``pg_switch_wal``).
    Nothing to do on a standby (it cannot write WAL; its positions are the primary's)."""
    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    if row is not None and row[0]:
        return
    for switches in range(MAX_WAL_SWITCHES):
        row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
        assert row is not None
        if parse_lsn(row[0]) > lsn:
            return
        if switches == 0:
            log.warning("the server's WAL (%s) is behind the log's last position %s (a "
                        "promoted standby that missed the old primary's last WAL): "
                        "switching WAL segments until it passes", row[0], format_lsn(lsn))
        try:
            conn.execute("SELECT pg_logical_emit_message(false, 'distributary.advance', '')")
            conn.execute("SELECT pg_switch_wal()")
        except psycopg.errors.InsufficientPrivilege as exc:
            raise SourceError(
                f"the server's WAL is behind the log's last position {format_lsn(lsn)}: a "
                "new slot here would give positions the log already holds. Let the "
                "application write until pg_current_wal_lsn() passes it, or run the "
                "capture once as a role that may call pg_switch_wal()") from exc
    raise SourceError(f"the server's WAL did not pass the log's last position "
                      f"{format_lsn(lsn)} after {MAX_WAL_SWITCHES} segment switches")


def wal_keep_limit(conn: psycopg.Connection[Any]) -> int | None:
    """``max_slot_wal_keep_size`` in bytes, or None when slots may keep any amount (-1)."""
    row = conn.execute("SELECT setting, unit FROM pg_settings "
                       "WHERE name = 'max_slot_wal_keep_size'").fetchone()
    if row is None or int(row[0]) < 0:
        return None
    return int(row[0]) * _UNIT_BYTES.get(str(row[1] or "B"), 1)


@dataclass(frozen=True, slots=True)
class WalRetention:
    """How much WAL a slot holds back, against the limit."""

    slot: str
    wal_status: str | None
    retained_bytes: int
    limit_bytes: int | None
    safe_bytes: int | None

    @property
    def fraction(self) -> float | None:
        """Retained WAL as a share of ``max_slot_wal_keep_size`` (None: no limit)."""
        if not self.limit_bytes:
            return None
        return self.retained_bytes / self.limit_bytes

    @property
    def level(self) -> Literal["ok", "warn", "error"]:
        """``error`` when lost; ``warn`` when unreserved or past ``WARN_FRACTION``."""
        if self.wal_status == "lost":
            return "error"
        near = self.fraction is not None and self.fraction >= WARN_FRACTION
        return "warn" if near or self.wal_status == "unreserved" else "ok"

    def describe(self) -> str:
        """``retained_wal=… (…% of max_slot_wal_keep_size=…)`` for logs and doctor."""
        text = f"wal_status={self.wal_status} retained_wal={_size(self.retained_bytes)}"
        if self.limit_bytes is None:
            return text + " (max_slot_wal_keep_size=-1: no limit)"
        text += (f" ({100 * (self.fraction or 0):.0f}% of max_slot_wal_keep_size="
                 f"{_size(self.limit_bytes)}")
        if self.safe_bytes is not None and self.wal_status != "lost":
            text += f"; lost after {_size(max(self.safe_bytes, 0))} more WAL"
        return text + ")"


def wal_retention(conn: psycopg.Connection[Any], state: SlotState) -> WalRetention:
    """The retention of ``state``'s slot, with the server's limit."""
    return WalRetention(state.name, state.wal_status, max(state.retained_bytes or 0, 0),
                        wal_keep_limit(conn), state.safe_wal_bytes)


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor:
            return f"{n} bytes ({n / factor:.1f} {unit})"
    return f"{n} bytes"
