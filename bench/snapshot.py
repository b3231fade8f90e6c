"""Initial snapshot throughput against a plain COPY of the same table (``make bench-snapshot``).

Starts its own PostgreSQL, fills ``orders`` (the table of docs/performance.md) with
1,000,000 rows (``BENCH_SCALE`` scales it), then side by side: the reference, ``COPY
(SELECT …) TO STDOUT`` of the table into /dev/null through psycopg (best of two runs,
one before and one after), and the capture's initial snapshot of the same table (one
COPY, or page ranges of ``BENCH_SNAPSHOT_RANGE_MB`` as ``source.snapshot_range_mb``; by
``BENCH_SNAPSHOT_WORKERS`` connections, one per CPU by default; and again as 64 MiB
ranges) —
inside a slot's exported snapshot, values through the codecs, ``r`` events appended to
a durable file log. Prints ``name=value`` lines, the headline ratio last.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql

from cdc.capture.schema.shapes import ShapeRegistry
from cdc.capture.snapshot.initial import run_initial_snapshot
from cdc.capture.snapshot.progress import SnapshotProgress
from cdc.capture.stream.replication import ReplicationConnection
from cdc.log.file import FileLog
from cdc.memory import keep_freed_memory
from compose.launcher import PostgresServer

SCALE = float(os.environ.get("BENCH_SCALE", "1"))
ROWS = int(1_000_000 * SCALE)
# the snapshot's parallel degree (connections) and page ranges, as ``source.`` settings
WORKERS = int(os.environ.get("BENCH_SNAPSHOT_WORKERS", str(os.cpu_count() or 1)))
RANGE_MB = int(os.environ.get("BENCH_SNAPSHOT_RANGE_MB", "0"))  # 0: one COPY per table
RANGED_MB = 64  # the other run: page ranges of this size
COLUMNS = ("id", "customer_id", "status", "amount", "note", "created_at")


def fill(dsn: str) -> None:
    """``orders`` with ``ROWS`` rows, analyzed (the progress estimate reads reltuples)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id int,"
                     " status text, amount numeric(12,2), note text, created_at timestamptz)")
        conn.execute("INSERT INTO orders (customer_id, status, amount, note, created_at)"
                     " SELECT mod(g, 1000), 'new', mod(g, 10000) / 100.0, 'note ' || g, now()"
                     " FROM generate_series(1, %s) g", (ROWS,))
        conn.execute("VACUUM ANALYZE orders")


def copy_seconds(dsn: str) -> float:
    """Seconds ``COPY (SELECT …) TO STDOUT`` of the table takes into /dev/null."""
    query = sql.SQL("COPY (SELECT {} FROM orders) TO STDOUT").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS))
    with psycopg.connect(dsn) as conn, open(os.devnull, "wb") as sink:
        started = time.perf_counter()
        with conn.cursor().copy(query) as copy:
            for block in copy:
                sink.write(block)
        return time.perf_counter() - started


def snapshot_seconds(dsn: str, log_dir: Path, range_mb: int = RANGE_MB) -> float:
    """Seconds the initial snapshot of the table takes into a durable file log, read as
    page ranges of ``range_mb`` (0: one COPY)."""
    event_log = FileLog(log_dir)
    producer = event_log.producer()
    try:
        with psycopg.connect(dsn, autocommit=True) as catalog, \
                ReplicationConnection(dsn) as repl:
            point, name = repl.create_slot("bench_snapshot", temporary=True,
                                           export_snapshot=True)
            assert name is not None
            shapes = ShapeRegistry(catalog, "bench")
            started = time.perf_counter()
            rows = run_initial_snapshot(dsn, name, point, shapes=shapes, producer=producer,
                                        tables=[("public", "orders")], database="bench",
                                        progress=SnapshotProgress(interactive=False),
                                        workers=WORKERS,
                                        range_bytes=range_mb << 20 if range_mb else None)
            elapsed = time.perf_counter() - started
    finally:
        event_log.close()
    assert rows == ROWS, f"the snapshot read {rows} rows, not {ROWS}"
    return elapsed


def main() -> None:
    """Fill, measure side by side, print the figures."""
    keep_freed_memory()  # as every ``cdc`` command does: batch buffers are not faulted in again
    workdir = Path(tempfile.mkdtemp(prefix="bench-snapshot-"))
    try:
        with PostgresServer(settings={"max_wal_size": "4GB"}) as server:
            dsn = server.dsn()
            fill(dsn)
            copy_first = copy_seconds(dsn)
            snap = snapshot_seconds(dsn, workdir / "log")
            ranged = snapshot_seconds(dsn, workdir / "ranged", RANGED_MB)
            copy_s = min(copy_first, copy_seconds(dsn))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"snapshot_parallel_degree={WORKERS}")
    print(f"snapshot_range_mb={RANGE_MB}")
    print(f"copy_rows_per_s={ROWS / copy_s:.0f}")
    print(f"snapshot_ranged_{RANGED_MB}mb_rows_per_s={ROWS / ranged:.0f}")
    print(f"snapshot_ranged_{RANGED_MB}mb_ratio_vs_copy={copy_s / ranged:.2f}")
    print(f"snapshot_rows_per_s={ROWS / snap:.0f}")
    print(f"snapshot_ratio_vs_copy={copy_s / snap:.2f}")


if __name__ == "__main__":
    main()
