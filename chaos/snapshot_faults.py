"""Faults of the initial snapshot: kill -9 in its middle, DDL while it runs, deletes and
updates while it is interrupted.

Before the capture first starts, the tables get rows (with the audit triggers off: these
rows predate the slot, so they reach the log as snapshot reads, not as changes). The
first run of ``cdc capture`` kills itself in the middle of the initial snapshot (crash
point ``snapshot_batch``); right after its slot appears, a migration adds a column and
rewrites a table; while it is down, rows are deleted and updated (audited: they must
reach the log as changes). The supervised capture then resumes the snapshot on the same
slot. The checks at the end (``verify``) replay the log and compare it with the tables,
so a row deleted while the snapshot was interrupted must not survive anywhere.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass

import psycopg

from .processes import SupervisedProcess

log = logging.getLogger(__name__)

MIGRATION = ("ALTER TABLE notes ADD COLUMN tag text DEFAULT 'chaos'",
             "ALTER TABLE items ALTER COLUMN qty TYPE bigint")  # a rewrite


@dataclass(frozen=True)
class SnapshotPlan:
    """How many rows exist before the slot, and where the first run kills itself."""

    bulk_rows: int
    other_rows: int
    crash_at_batch: int = 3  # the N-th durable append of snapshot rows (10,000 each)


def prefill(dsn: str, plan: SnapshotPlan) -> None:
    """Rows that predate the slot (not audited: the log gets them as ``r`` events)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # no audit triggers
        conn.execute("INSERT INTO bulk SELECT g %% 7, -g, 0 FROM generate_series(1, %s) g",
                     (plan.bulk_rows,))
        conn.execute("INSERT INTO items SELECT g %% 7, g, g %% 100, 'item ' || g, "
                     "CASE WHEN g %% 3 = 0 THEN NULL ELSE 'prefilled ' || g END "
                     "FROM generate_series(1, %s) g", (plan.other_rows,))
        conn.execute("INSERT INTO notes SELECT g %% 7, g, 'note ' || g "
                     "FROM generate_series(1, %s) g", (plan.other_rows,))
        conn.execute("ANALYZE bulk, items, notes")


def _slot_exists(dsn: str, slot: str) -> bool:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s",
                            (slot,)).fetchone() is not None


def interrupted_snapshot(dsn: str, slot: str, capture: SupervisedProcess, plan: SnapshotPlan,
                         done: Counter[str], errors: list[str]) -> None:
    """The first run: killed mid-snapshot, a migration meanwhile, changes while down."""
    proc = capture.spawn_once({"DISTRIBUTARY_CRASH_AT": f"snapshot_batch:{plan.crash_at_batch}"})
    deadline = time.monotonic() + 120
    while not _slot_exists(dsn, slot):
        if proc.poll() is not None or time.monotonic() > deadline:
            errors.append(f"kill_in_snapshot: the first run exited ({proc.returncode}) "
                          "before creating its slot")
            return
        time.sleep(0.05)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in MIGRATION:  # a table being read: waits for the kill's unlock
            conn.execute(statement.encode())
    done["ddl_in_snapshot"] += 1
    try:
        code = proc.wait(timeout=180)
    except Exception:
        proc.kill()
        code = proc.wait()
    if code == -9:
        done["kill_in_snapshot"] += 1
    else:
        errors.append(f"kill_in_snapshot: the first run ended with {code}, not at its "
                      f"crash point ({capture.log_tail(5)})")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM bulk WHERE id IN (SELECT id FROM bulk ORDER BY id LIMIT 100)")
        conn.execute("DELETE FROM items WHERE id % 101 = 5")
        conn.execute("DELETE FROM notes WHERE id % 101 = 6")
        conn.execute("UPDATE bulk SET n = n + 1 WHERE id % 211 = 0")
        conn.execute("UPDATE items SET label = label || ' (while down)' WHERE id % 103 = 0")
    done["deletes_while_interrupted"] += 1
    log.info("initial snapshot interrupted; migrated and changed rows while it was down")
