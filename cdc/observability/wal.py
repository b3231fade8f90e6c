"""The server side of capture lag: current WAL position and the slot's retained WAL.

Read on an ordinary (not replication) connection of its own, at most once per sample
interval, never on the capture's connections. A failed read is logged once per outage and
leaves the figures unknown; the next read reconnects.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any

import psycopg

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5

# On a standby (logical decoding there needs PostgreSQL 16+) the replayed position is
# the newest WAL the slot can see.
_QUERY = """
SELECT pg_wal_lsn_diff(w.lsn, '0/0')::bigint,
       pg_wal_lsn_diff(w.lsn, s.restart_lsn)::bigint,
       pg_wal_lsn_diff(s.confirmed_flush_lsn, '0/0')::bigint
FROM (SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
                  ELSE pg_current_wal_lsn() END AS lsn) AS w
LEFT JOIN pg_replication_slots AS s ON s.slot_name = %s
"""


@dataclass(frozen=True, slots=True)
class WalPositions:
    """Where the server's WAL ends, what the slot retains and what it confirmed."""

    current_lsn: int
    retained_bytes: int | None  # None: the slot does not exist (yet)
    confirmed_lsn: int | None


class ServerWal:
    """Reads ``WalPositions`` for one slot over a connection it opens and reopens."""

    def __init__(self, conninfo: str, slot: str) -> None:
        self._conninfo = conninfo
        self._slot = slot
        self._conn: psycopg.Connection[Any] | None = None
        self._failing = False

    def read(self) -> WalPositions | None:
        """The current positions, or None if the server cannot be asked right now."""
        try:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(self._conninfo, autocommit=True,
                                             connect_timeout=CONNECT_TIMEOUT_S,
                                             application_name="distributary-metrics")
            row = self._conn.execute(_QUERY, (self._slot,)).fetchone()
        except psycopg.Error as exc:
            if not self._failing:
                log.warning("cannot read the WAL position for the metrics: %s (%s)",
                            type(exc).__name__, exc.sqlstate or "no SQLSTATE",
                            extra={"slot": self._slot})
            self._failing = True
            self.close()
            return None
        if self._failing:
            log.info("reading the WAL position for the metrics again", extra={"slot": self._slot})
        self._failing = False
        assert row is not None  # the FROM clause always yields one row
        current, retained, confirmed = row
        return WalPositions(int(current), None if retained is None else max(0, int(retained)),
                            None if confirmed is None else int(confirmed))

    def close(self) -> None:
        """Close the connection (a later ``read`` opens a new one)."""
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None
