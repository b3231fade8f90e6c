"""Replicas of one capture: which one streams, and taking over from one that went silent.

PostgreSQL lets one walsender hold a replication slot: the replica whose session holds
it is *active*, the others are *standbys* that wait here for it. The active one sends a
standby status update every second (``pg_stat_replication.reply_time``), so a holder
silent for longer than ``capture.takeover_after`` is stalled, partitioned or gone with
its host: a standby terminates its walsender (PostgreSQL would wait for
``wal_sender_timeout``, a minute by default) and takes the slot. A replica killed
outright frees the slot at once (its socket closes). The log's own fencing (Kafka
transactions, ``Producer.claim``) then keeps a replica that wakes up from writing.

Only a walsender that is streaming is ever terminated: one that holds the slot while it
exports the initial snapshot has no reply time yet, and waits out its own timeout.

A replica claims the log (fencing every other writer) a moment before it holds the slot.
One whose writes were fenced therefore does not take the free slot back at once: it
waits for the replica that fenced it to stream, or for ``takeover_after`` without one
(that one died on its way). Else two replicas started together fence each other in turn.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import psycopg

from ..findings import Finding
from ..stream.replication import replica_name

log = logging.getLogger(__name__)

POLL_S = 0.5


@dataclass(frozen=True, slots=True)
class SlotHolder:
    """The walsender holding a slot, and how long it has been silent."""

    pid: int
    name: str  # its application_name: "distributary <host> <pid>" for a capture replica
    streaming: bool  # START_REPLICATION ran (pg_stat_replication.state streaming/catchup)
    silent_s: float  # since its client's last status update (or since it started)


def slot_holder(conn: psycopg.Connection[Any], slot: str) -> SlotHolder | None:
    """Who holds ``slot`` now; None when nobody does (or the slot does not exist)."""
    row = conn.execute(
        "SELECT s.active_pid, coalesce(r.application_name, ''),"
        " r.state IN ('streaming', 'catchup'),"
        " EXTRACT(EPOCH FROM clock_timestamp() - COALESCE(r.reply_time, r.backend_start))"
        " FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid"
        " WHERE s.slot_name = %s", (slot,)).fetchone()
    if row is None or row[0] is None:
        return None
    return SlotHolder(int(row[0]), str(row[1]), bool(row[2]), float(row[3] or 0.0))


@dataclass
class Takeover:
    """How a standby came to stream: whether another replica held the slot before, and
    when that one last showed life (monotonic clock)."""

    waited: bool = False
    last_life: float = 0.0

    def seconds(self) -> float:
        """From the previous holder's last sign of life until now."""
        return time.monotonic() - self.last_life


class Standby:
    """Waits until this replica may take ``slot`` (see the module docstring)."""

    def __init__(self, slot: str, takeover_after_s: float, *, poll_s: float = POLL_S) -> None:
        self.slot = slot
        self.takeover_after_s = takeover_after_s
        self.poll_s = poll_s
        self._denied: set[int] = set()  # holders this role may not terminate (logged once)
        self._fenced_at: float | None = None  # when another replica claimed the log

    def fenced(self) -> None:
        """This replica's writes were fenced: another one claimed the log (module doc)."""
        self._fenced_at = time.monotonic()

    def wait(self, conn: psycopg.Connection[Any], stop: threading.Event) -> Takeover | None:
        """Return once nobody holds the slot (a silent holder is terminated first); None
        when ``stop`` was set meanwhile."""
        takeover = Takeover()
        while not stop.is_set():
            holder = slot_holder(conn, self.slot)
            if holder is not None and holder.name == replica_name():
                holder = None  # this replica's own walsender, on its way out
            if holder is None:
                if not self._yielding(takeover):
                    return takeover
                stop.wait(self.poll_s)
                continue
            self._fenced_at = None  # whoever fenced this replica streams now
            takeover.last_life = time.monotonic() - holder.silent_s
            if not takeover.waited:
                takeover.waited = True
                log.info("slot %s is streamed by another capture (%s, walsender pid %d): "
                         "standing by, taking over when it is silent for %.0f s", self.slot,
                         holder.name or "unnamed", holder.pid, self.takeover_after_s,
                         extra={"slot": self.slot})
            if holder.streaming and holder.silent_s > self.takeover_after_s:
                self._terminate(conn, holder)
            stop.wait(self.poll_s)
        return None

    def _yielding(self, takeover: Takeover) -> bool:
        """Whether a fenced replica still leaves the free slot to the one that fenced it."""
        if self._fenced_at is None:
            return False
        if not takeover.waited:
            takeover.waited = True
            takeover.last_life = self._fenced_at
            log.info("another capture claimed the log of slot %s: standing by, taking "
                     "over if it does not stream within %.0f s", self.slot,
                     self.takeover_after_s, extra={"slot": self.slot})
        if time.monotonic() - self._fenced_at < self.takeover_after_s:
            return True
        self._fenced_at = None
        return False

    def _terminate(self, conn: psycopg.Connection[Any], holder: SlotHolder) -> None:
        if holder.pid in self._denied:
            return
        try:
            conn.execute("SELECT pg_terminate_backend(%s)", (holder.pid,))
        except psycopg.errors.InsufficientPrivilege:
            self._denied.add(holder.pid)
            log.warning("the capture streaming slot %s has been silent for %.1f s, but this "
                        "role may not terminate its walsender (pid %d): waiting for "
                        "PostgreSQL's wal_sender_timeout instead (GRANT pg_signal_backend TO "
                        "<role>; cdc doctor checks it)", self.slot, holder.silent_s,
                        holder.pid, extra={"slot": self.slot})
            return
        log.warning("the capture streaming slot %s has been silent for %.1f s: terminated "
                    "its walsender (pid %d) to take over", self.slot, holder.silent_s,
                    holder.pid, extra={"slot": self.slot})


def takeover_findings(conn: psycopg.Connection[Any]) -> list[Finding]:
    """``cdc doctor``: may a standby replica terminate a silent walsender?"""
    row = conn.execute("SELECT current_user, rolsuper OR pg_has_role(current_user, "
                       "'pg_signal_backend', 'USAGE') FROM pg_roles "
                       "WHERE rolname = current_user").fetchone()
    if row is not None and row[1]:
        return [Finding("ok", "takeover", f"role {row[0]} may terminate a silent replica's "
                        "walsender (capture.takeover_after)")]
    role = row[0] if row is not None else "the capture's role"
    return [Finding("ok", "takeover", f"role {role} may terminate the walsenders of its own "
                    "role only: every replica of this pipeline must connect as it, else a "
                    "standby waits for wal_sender_timeout instead of capture.takeover_after",
                    f"to allow any role: GRANT pg_signal_backend TO {role};")]
