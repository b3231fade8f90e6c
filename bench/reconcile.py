"""``cdc reconcile`` against a plain scan of the same data (``make bench-reconcile``).

A table of 1,000,000 rows (``BENCH_SCALE`` scales it) goes through ``cdc run`` into
OpenSearch and Redis (its initial snapshot); once both connectors have consumed it,
``cdc reconcile`` checks the table with no drift (a subprocess, timed from start to
exit), and the reference reads the same data plainly in the same run: ``COPY`` of the
table, a scroll of the index with sources, a ``SCAN`` of the keys with ``MGET`` of
their values. ``reconcile_ratio_vs_scan`` is reference time / reconcile time (1.0: as
fast; target ≥ 0.5). The servers come from ``compose.launcher``.
``BENCH_PROFILE=FILE`` runs the reconcile under ``py-spy record`` (raw stacks, every
thread, idle included; ``BENCH_PROFILE_FLAGS`` adds py-spy flags such as ``--gil``) into
FILE: its time is then no measurement.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import redis
from opensearchpy import OpenSearch, helpers
from psycopg import sql

from cdc.log.file import FileLog
from compose.launcher import services

SCALE = float(os.environ.get("BENCH_SCALE", "1"))
ROWS = max(1_000, int(1_000_000 * SCALE))
PAGE = 1000
PROFILE = os.environ.get("BENCH_PROFILE")


def _config(path: Path, dsn: str, name: str, opensearch_url: str, redis_url: str) -> None:
    path.write_text(f"""
source:
  dsn: {dsn}
  slot: {name}
  publication: {name}
  tables: [public.orders]
log:
  backend: file
  path: {path.parent / 'log'}
  partitions: 3
connectors:
  - name: search
    type: opensearch
    topics: [{name}.public.orders]
    batch_size: 2000
    config:
      hosts: [{opensearch_url}]
      index: "{name}_{{table}}"
      bulk_size: 2000
  - name: cache
    type: redis
    topics: [{name}.public.orders]
    batch_size: 2000
    config:
      url: {redis_url}
      key_template: "{name}:{{table}}:{{key}}"
""")


@contextlib.contextmanager
def _database(admin_dsn: str, name: str) -> Iterator[str]:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = admin_dsn.rsplit("/", 1)[0] + f"/{name}"
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, status text NOT NULL, "
                         "amount numeric(12, 2), placed timestamptz, note text)")
            conn.execute("INSERT INTO orders SELECT i, (ARRAY['new', 'paid', 'sent'])[i %% 3 + 1],"
                         " i * 0.25, '2026-01-01'::timestamptz + i * interval '1 second',"
                         " 'order number ' || i FROM generate_series(1, %s) AS i", (ROWS,))
            conn.execute("VACUUM ANALYZE orders")
        yield dsn
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                         " WHERE slot_name = %s AND NOT active", (name,))
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                         .format(sql.Identifier(name)))


def _wait_loaded(log_path: Path, topic: str, process: subprocess.Popen[bytes]) -> float:
    """Seconds until both connectors committed the whole snapshot."""
    started = time.monotonic()
    while True:
        assert process.poll() is None, "cdc run stopped"
        admin = FileLog(log_path).admin()
        ends = {p.partition: p.end_offset for p in admin.partitions(topic)}
        done = sum(ends.values()) >= ROWS and all(
            {lag.partition: lag.committed or 0 for lag in admin.group_lag(group)
             if lag.topic == topic} == ends for group in ("search", "cache"))
        if done:
            return time.monotonic() - started
        time.sleep(1.0)


def _reference(dsn: str, opensearch_url: str, index: str, redis_url: str,
               pattern: str) -> tuple[float, int, int, int]:
    """Seconds of the plain reads, and how many rows, documents and values they saw."""
    started = time.monotonic()
    rows = 0
    with psycopg.connect(dsn) as conn, conn.cursor() as cursor, \
            cursor.copy("COPY orders TO STDOUT") as copy:
        for block in copy:
            rows += bytes(block).count(b"\n")
    search = OpenSearch([opensearch_url], timeout=120)
    documents = sum(1 for _ in helpers.scan(search, index=index, size=PAGE,
                                            query={"query": {"match_all": {}}}))
    search.close()
    cache = redis.Redis.from_url(redis_url)
    values, batch = 0, []
    for key in cache.scan_iter(match=pattern, count=PAGE):
        batch.append(key)
        if len(batch) == PAGE:
            values += _present(cache.mget(batch))
            batch = []
    values += _present(cache.mget(batch)) if batch else 0
    cache.close()
    return time.monotonic() - started, rows, documents, values


def _present(found: Any) -> int:
    return sum(value is not None for value in found)


def main() -> None:
    """Load, reconcile, read plainly; print ``name=value`` lines."""
    name = f"bench_rec_{uuid.uuid4().hex[:8]}"
    with contextlib.ExitStack() as stack:
        admin_dsn = stack.enter_context(services.postgres_dsn())
        redis_url = stack.enter_context(services.redis_url())
        opensearch_url = stack.enter_context(services.opensearch_url())
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-rec-")))
        dsn = stack.enter_context(_database(admin_dsn, name))
        config = workdir / "pipeline.yaml"
        _config(config, dsn, name, opensearch_url, redis_url)
        stderr = (workdir / "stderr.log").open("wb")
        stack.callback(stderr.close)
        process = subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c", str(config)],
                                   stdout=subprocess.DEVNULL, stderr=stderr)
        stack.callback(_cleanup, opensearch_url, redis_url, name)
        stack.callback(_stop, process)
        load_s = _wait_loaded(workdir / "log", f"{name}.public.orders", process)
        started = time.monotonic()
        done = subprocess.run([*_profiler(), sys.executable, "-m", "cdc.cli", "reconcile",
                               "-c", str(config)], capture_output=True, text=True, check=False)
        reconcile_s = time.monotonic() - started
        summary = next((line for line in reversed(done.stdout.splitlines())
                        if line.startswith("reconcile:")), done.stderr)
        expected = f"reconcile: tables=1 rows={ROWS} missing=0 extra=0 different=0"
        assert done.returncode == 0 and summary == expected, (done.returncode, summary)
        reference_s, rows, documents, values = _reference(
            dsn, opensearch_url, f"{name}_orders", redis_url, f"{name}:orders:*")
        assert rows == documents == values == ROWS, (rows, documents, values)
        print(f"reconcile_rows={ROWS}")
        print(f"load_seconds={load_s:.1f}")
        print(f"reconcile_seconds={reconcile_s:.2f}")
        print(f"reference_seconds={reference_s:.2f}")
        print(f"reconcile_rows_per_s={ROWS / reconcile_s:.0f}")
        print(f"reconcile_ratio_vs_scan={reference_s / reconcile_s:.2f}")


def _profiler() -> list[str]:
    """``py-spy record`` in front of the reconcile when ``BENCH_PROFILE`` names a file."""
    if not PROFILE:
        return []
    py_spy = str(Path(sys.executable).with_name("py-spy"))
    flags = os.environ.get("BENCH_PROFILE_FLAGS", "").split()  # e.g. --gil
    return [py_spy, "record", "-r", "200", "-f", "raw", "--threads", "--idle", "--nonblocking",
            *flags, "-o", PROFILE,
            "--"]


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _cleanup(opensearch_url: str, redis_url: str, name: str) -> None:
    search = OpenSearch([opensearch_url])
    search.indices.delete(index=f"{name}*", expand_wildcards="all", ignore_unavailable=True)
    search.close()
    cache = redis.Redis.from_url(redis_url)
    batch: list[Any] = []
    for key in cache.scan_iter(match=f"*{name}:*", count=PAGE):
        batch.append(key)
        if len(batch) == PAGE:  # one UNLINK a page, not a round trip a key
            cache.unlink(*batch)
            batch = []
    if batch:
        cache.unlink(*batch)
    cache.close()


if __name__ == "__main__":
    main()
