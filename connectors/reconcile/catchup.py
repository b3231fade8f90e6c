"""Waiting until a connector has applied everything committed before a WAL position.

First the capture: the slot's ``confirmed_flush_lsn`` reaches the position only once
every transaction before it is durably in the log. So that an idle database need not
wait for the capture's next heartbeat, the wait first writes a tiny non-transactional
logical message (prefix ``distributary.reconcile``, which the capture does not log):
the capture acknowledges past it as soon as nothing before it is pending. Then the
connector: its consumer group's committed offsets reach the topic's end offsets taken
after that, and offsets are committed only after the sink's writes are durable.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import psycopg

from cdc.errors import DistributaryError
from cdc.log import Log

POLL_S = 0.05
MAX_POLL_S = 0.5
PING_PREFIX = "distributary.reconcile"


class CatchUpTimeoutError(DistributaryError):
    """The capture or a connector did not get as far as needed in time."""


def lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def ping(conn: psycopg.Connection[Any]) -> int | None:
    """Write the message (see the module docstring); its position, or ``None`` when the
    role may not write one."""
    try:
        row = conn.execute("SELECT pg_logical_emit_message(false, %s, '') - '0/0'::pg_lsn",
                           (PING_PREFIX,)).fetchone()
    except psycopg.errors.InsufficientPrivilege:
        return None
    return None if row is None else int(row[0])


def wait_logged(conn: psycopg.Connection[Any], slot: str, lsn: int, timeout_s: float) -> None:
    """Until ``slot``'s confirmed flush position is past ``lsn``."""
    deadline, pause = time.monotonic() + timeout_s, POLL_S
    lsn = max(lsn, (ping(conn) or 0) + 1)
    confirmed: int | None = None
    while True:
        row = conn.execute("SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM "
                           "pg_replication_slots WHERE slot_name = %s", (slot,)).fetchone()
        if row is None:
            raise CatchUpTimeoutError(f"replication slot {slot!r} does not exist: is the "
                                      "capture set up (cdc capture / cdc run)?")
        confirmed = None if row[0] is None else int(row[0])
        if confirmed is not None and confirmed >= lsn:
            return
        if time.monotonic() > deadline:
            raise CatchUpTimeoutError(
                f"the capture has not logged WAL up to {lsn_text(lsn)} within "
                f"{timeout_s:g}s (slot {slot!r} confirmed "
                f"{lsn_text(confirmed) if confirmed is not None else 'nothing'}); is it "
                "running? (--timeout waits longer)")
        time.sleep(pause)
        pause = min(pause * 2, MAX_POLL_S)


def wait_consumed(event_log: Log, group: str, topics: Sequence[str], timeout_s: float) -> None:
    """Until ``group`` has committed the end offsets ``topics`` have now."""
    admin = event_log.admin()
    ends = {(info.topic, info.partition): info.end_offset for topic in topics
            for info in admin.partitions(topic) if info.end_offset > info.start_offset}
    deadline, pause = time.monotonic() + timeout_s, POLL_S
    while True:
        committed = {(lag.topic, lag.partition): lag.committed or 0
                     for lag in admin.group_lag(group) if lag.topic in topics}
        behind = {tp: end for tp, end in ends.items() if committed.get(tp, 0) < end}
        if not behind:
            return
        if time.monotonic() > deadline:
            (topic, partition), end = sorted(behind.items())[0]
            raise CatchUpTimeoutError(
                f"connector {group!r} has not consumed {topic}[{partition}] up to offset "
                f"{end} within {timeout_s:g}s (committed {committed.get((topic, partition), 0)}"
                f"; {len(behind)} partition(s) behind); is it running? (--timeout waits "
                "longer)")
        time.sleep(pause)
        pause = min(pause * 2, MAX_POLL_S)
