"""Whether a decoded transaction is visible yet to the capture's catalog reads.

The walsender can send a transaction's commit before the committing backend has left
PostgreSQL's list of running transactions: a catalog query in that window takes a
snapshot in which the transaction still runs, and does not see the types it created —
their columns' values would silently stay text. ``transaction_visible`` asks whether a
fresh snapshot sees transaction ``xid`` (pgoutput's 32-bit id); ``wait_until_visible``
asks again, briefly, until it does. A transaction that is visible yet whose types are
missing dropped them since: waiting would not bring them back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import psycopg

from cdc.backoff import ExponentialBackoff

from ..snapshot.watermarks import SnapshotXids

log = logging.getLogger(__name__)

_SNAPSHOT_SQL = "SELECT pg_catalog.pg_current_snapshot()::text"
BUDGET_S = 10.0
_BACKOFF = ExponentialBackoff(0.002, 0.1)


def transaction_visible(conn: psycopg.Connection[Any], xid: int) -> bool:
    """Whether a snapshot taken now (``conn`` in autocommit) sees transaction ``xid``."""
    row = conn.execute(_SNAPSHOT_SQL).fetchone()
    return row is not None and SnapshotXids.parse(str(row[0])).visible(xid)


def wait_until_visible(conn: psycopg.Connection[Any], xid: int, *, budget_s: float = BUDGET_S,
                       sleep: Callable[[float], None] = time.sleep,
                       clock: Callable[[], float] = time.monotonic) -> bool:
    """Ask until transaction ``xid`` is visible (True), for up to ``budget_s`` (False)."""
    deadline = clock() + budget_s
    attempts = 0
    while not transaction_visible(conn, xid):
        attempts += 1
        if clock() >= deadline:
            log.warning("transaction %d was decoded as committed but is still not visible "
                        "to catalog reads after %g s", xid, budget_s)
            return False
        sleep(_BACKOFF.delay(attempts))
    return True
