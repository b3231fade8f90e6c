"""The writer: small mixed transactions, truncates and a few very large transactions.

One connection writes (so commit order is the order of the audit table's ids). When a
transaction fails — PostgreSQL restarting, a connection cut — the writer reconnects
and reloads which keys exist: the audit table, not the writer, says what committed.
"""

from __future__ import annotations

import base64
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

log = logging.getLogger(__name__)

TENANTS = 4


@dataclass
class WorkloadStats:
    """What the writer did (committed as far as it knows)."""

    transactions: int = 0
    large_transactions: int = 0
    truncates: int = 0
    failures: int = 0


@dataclass
class WorkloadPlan:
    """How hard to write: small transactions per second and the large ones' row count."""

    rate: float = 25.0
    large_rows: int = 200_000
    large_every_s: float = 120.0
    truncate_every_s: float = 40.0


@dataclass
class _Keys:
    items: list[tuple[int, int]] = field(default_factory=list)
    notes: list[tuple[int, int]] = field(default_factory=list)
    next_id: int = 1


class Workload:
    """Writes to the chaos schema until ``stop`` is set (see the module docstring)."""

    def __init__(self, dsn: str, rng: random.Random, plan: WorkloadPlan) -> None:
        self.dsn = dsn
        self.rng = rng
        self.plan = plan
        self.stats = WorkloadStats()
        self._keys = _Keys()
        self._large_step = 0

    def run(self, stop: threading.Event) -> None:
        """Write until ``stop``; survive any number of connection failures."""
        start = time.monotonic()
        next_large = start + self.plan.large_every_s / 3
        next_truncate = start + self.plan.truncate_every_s / 2
        conn: psycopg.Connection[Any] | None = None
        while not stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)
                    self._reload_keys(conn)
                now = time.monotonic()
                if now >= next_large:
                    next_large = now + self.plan.large_every_s
                    self._large(conn)
                elif now >= next_truncate:
                    next_truncate = now + self.plan.truncate_every_s
                    conn.execute("TRUNCATE notes")
                    self._keys.notes.clear()
                    self.stats.truncates += 1
                else:
                    with conn.transaction():
                        for _ in range(self.rng.randint(1, 4)):
                            self._small_change(conn)
                self.stats.transactions += 1
            except psycopg.Error as exc:
                self.stats.failures += 1
                log.info("workload: %s: %s; reconnecting", type(exc).__name__,
                         str(exc).splitlines()[0] if str(exc) else "")
                if conn is not None:
                    conn.close()
                conn = None
                stop.wait(0.5)
                continue
            stop.wait(self.rng.expovariate(self.plan.rate))
        if conn is not None:
            conn.close()

    def _reload_keys(self, conn: psycopg.Connection[Any]) -> None:
        keys = self._keys
        keys.items = [tuple(r) for r in conn.execute("SELECT tenant, id FROM items")]
        keys.notes = [tuple(r) for r in conn.execute("SELECT tenant, id FROM notes")]
        top = conn.execute("SELECT coalesce(max(id), 0) FROM items").fetchone()
        keys.next_id = max(keys.next_id, int(top[0]) + 1 if top else 1)

    def _new_key(self) -> tuple[int, int]:
        self._keys.next_id += 1
        return self.rng.randint(1, TENANTS), self._keys.next_id

    def _body(self) -> str | None:
        """NULL, a short text, or a TOAST-sized one that does not compress below 2 kB."""
        choice = self.rng.random()
        if choice < 0.2:
            return None
        if choice < 0.6:
            return f"short {self.rng.random()}"
        return base64.b64encode(self.rng.randbytes(self.rng.randint(3_000, 18_000))).decode()

    def _small_change(self, conn: psycopg.Connection[Any]) -> None:
        keys, rng = self._keys, self.rng
        kind = rng.random()
        if kind < 0.35 or not keys.items:
            key = self._new_key()
            conn.execute("INSERT INTO items VALUES (%s, %s, %s, %s, %s)",
                         (*key, rng.randint(0, 100), f"item {key[1]}", self._body()))
            keys.items.append(key)
        elif kind < 0.60:  # body untouched: an unchanged TOAST column in the stream
            conn.execute("UPDATE items SET qty = qty + %s WHERE tenant = %s AND id = %s",
                         (rng.randint(1, 5), *rng.choice(keys.items)))
        elif kind < 0.70:
            conn.execute("UPDATE items SET body = %s, label = label || '+' "
                         "WHERE tenant = %s AND id = %s", (self._body(), *rng.choice(keys.items)))
        elif kind < 0.80:
            key = keys.items.pop(rng.randrange(len(keys.items)))
            conn.execute("DELETE FROM items WHERE tenant = %s AND id = %s", key)
        elif kind < 0.93 or not keys.notes:
            key = self._new_key()
            conn.execute("INSERT INTO notes VALUES (%s, %s, %s)", (*key, f"note {rng.random()}"))
            keys.notes.append(key)
        else:
            key = rng.choice(keys.notes)
            conn.execute("UPDATE notes SET note = note || '!' WHERE tenant = %s AND id = %s", key)

    def _large(self, conn: psycopg.Connection[Any]) -> None:
        """One very large transaction: insert, update or delete ``large_rows`` rows."""
        rows = self.plan.large_rows
        step, self._large_step = self._large_step % 3, self._large_step + 1
        if step == 0:
            start = self._large_step * rows * 10
            conn.execute("INSERT INTO bulk SELECT g %% 7, g, 0 FROM generate_series(%s, %s) g",
                         (start, start + rows - 1))
        elif step == 1:
            conn.execute("UPDATE bulk SET n = n + 1 WHERE id IN "
                          "(SELECT id FROM bulk ORDER BY id DESC LIMIT %s)", (rows,))
        else:
            conn.execute("DELETE FROM bulk WHERE id IN "
                         "(SELECT id FROM bulk ORDER BY id LIMIT %s)", (rows // 2,))
        self.stats.large_transactions += 1
