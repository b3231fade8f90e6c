"""The soak's writer: a steady rate of rows in ten transactions a second, with large
transactions, TOAST rewrites and a few migrations mixed in.

Each transaction (a *tick*) updates the next accounts of a sweep over all of them (one in
twenty gets a new ``doc``; the others leave it unchanged, so the stream carries it as an
unchanged TOAST column), inserts new orders, deletes the oldest ones and sets the clock
row to the writer's clock. A tick that falls more than a second behind its schedule is
skipped, not made up, so an outage of PostgreSQL does not end in a burst. One connection
writes; a failed transaction (PostgreSQL restarting) reconnects and goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, LiteralString

import psycopg

from .schema import DOC_REPEATS

log = logging.getLogger(__name__)

TICKS_PER_S = 10
UPDATE_SHARE, INSERT_SHARE = 0.6, 0.2  # the rest of a tick's rows are deletes
DOC_EVERY = 20  # one updated account in this many gets a new doc


@dataclass(frozen=True)
class WorkloadPlan:
    """How hard to write and what to mix in (times in seconds from the start)."""

    rate: float  # rows a second (updates, inserts and deletes)
    accounts: int
    orders_alive_s: float  # how long an order lives before the queue deletes it
    large_rows: int  # accounts one large transaction updates
    large_at: tuple[float, ...]
    migrations: tuple[tuple[float, LiteralString], ...]  # (when, statement)

    @property
    def rows_per_tick(self) -> int:
        return max(5, round(self.rate / TICKS_PER_S))

    @property
    def orders_alive(self) -> int:
        """Orders alive at any time: the inserts of ``orders_alive_s``."""
        return round(self.rate * INSERT_SHARE * self.orders_alive_s)


@dataclass
class WorkloadStats:
    """What the writer committed (as far as it knows) and missed."""

    rows: int = 0
    transactions: int = 0
    large_transactions: int = 0
    migrations: int = 0
    skipped_ticks: int = 0
    failures: int = 0
    errors: list[str] = field(default_factory=list)


class Workload:
    """Writes ``plan`` until ``stop`` is set (see the module docstring)."""

    def __init__(self, dsn: str, plan: WorkloadPlan) -> None:
        self.dsn = dsn
        self.plan = plan
        self.stats = WorkloadStats()
        self._sweep = 0  # the next account the sweep updates (0-based)
        self._next_order = plan.orders_alive + 1
        self._orders_have_note = False
        self.committed_clock: list[int] = []  # the clock values committed, ascending

    def run(self, stop: threading.Event) -> None:
        """Write until ``stop``; survive any number of connection failures."""
        start = time.monotonic()
        large = list(self.plan.large_at)
        migrations = list(self.plan.migrations)
        conn: psycopg.Connection[Any] | None = None
        tick = 0
        while not stop.is_set():
            due = start + tick / TICKS_PER_S
            late = time.monotonic() - due
            if late > 1.0:  # behind (an outage): skip to now rather than burst
                skipped = int(late * TICKS_PER_S)
                self.stats.skipped_ticks += skipped
                tick += skipped
                continue
            stop.wait(max(0.0, -late))
            elapsed = time.monotonic() - start
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)
                    self._orders_have_note = _has_column(conn, "orders", "note")
                if migrations and elapsed >= migrations[0][0]:
                    self._migrate(conn, migrations[0][1])
                    migrations.pop(0)
                elif large and elapsed >= large[0]:
                    self._large(conn)
                    large.pop(0)
                self._tick(conn)
            except psycopg.Error as exc:
                self.stats.failures += 1
                log.info("soak workload: %s: %s; reconnecting", type(exc).__name__,
                         str(exc).splitlines()[0] if str(exc) else "")
                if conn is not None:
                    conn.close()
                conn = None
                stop.wait(0.5)
            tick += 1
        if conn is not None:
            conn.close()

    def _tick(self, conn: psycopg.Connection[Any]) -> None:
        plan = self.plan
        rows = plan.rows_per_tick
        updates = round(rows * UPDATE_SHARE)
        inserts = round(rows * INSERT_SHARE)
        deletes = rows - updates - inserts
        ids = [(self._sweep + i) % plan.accounts + 1 for i in range(updates)]
        first_order = self._next_order
        with conn.transaction():
            conn.execute("UPDATE accounts SET balance = balance + 1, touches = touches + 1 "
                         "WHERE id = ANY(%s)", (ids,))
            conn.execute("UPDATE accounts SET doc = repeat(md5(%s), %s) WHERE id = ANY(%s)",
                         (f"{time.time_ns()}", DOC_REPEATS, ids[::DOC_EVERY]))
            if self._orders_have_note:
                conn.execute("INSERT INTO orders (id, account, amount, placed_at, note) "
                             "SELECT g, g %% %s + 1, (g %% 10000) / 100.0, now(), 'n' || g "
                             "FROM generate_series(%s, %s) g",
                             (plan.accounts, first_order, first_order + inserts - 1))
            else:
                conn.execute("INSERT INTO orders (id, account, amount, placed_at) "
                             "SELECT g, g %% %s + 1, (g %% 10000) / 100.0, now() "
                             "FROM generate_series(%s, %s) g",
                             (plan.accounts, first_order, first_order + inserts - 1))
            oldest_kept = first_order + inserts - plan.orders_alive
            conn.execute("DELETE FROM orders WHERE id < %s AND id >= %s",
                         (oldest_kept, oldest_kept - deletes))
            clock = time.time_ns() // 1000
            conn.execute("UPDATE soak_clock SET at_us = %s WHERE id = 1", (clock,))
        self.committed_clock.append(clock)
        self._sweep = (self._sweep + updates) % plan.accounts
        self._next_order = first_order + inserts
        self.stats.rows += rows
        self.stats.transactions += 1

    def _large(self, conn: psycopg.Connection[Any]) -> None:
        """One large transaction: ``large_rows`` accounts updated at once."""
        conn.execute("UPDATE accounts SET balance = balance + 1000 WHERE id <= %s",
                     (self.plan.large_rows,))
        self.stats.large_transactions += 1
        self.stats.rows += self.plan.large_rows

    def _migrate(self, conn: psycopg.Connection[Any], statement: LiteralString) -> None:
        log.info("soak workload: migration: %s", statement)
        conn.execute(statement)  # a constant of the plan, never built from input
        self.stats.migrations += 1
        self._orders_have_note = _has_column(conn, "orders", "note")


def _has_column(conn: psycopg.Connection[Any], table: str, column: str) -> bool:
    row = conn.execute("SELECT 1 FROM information_schema.columns WHERE table_schema = "
                       "'public' AND table_name = %s AND column_name = %s",
                       (table, column)).fetchone()
    return row is not None
