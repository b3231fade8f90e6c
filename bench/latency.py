"""End-to-end latency through ``cdc run`` (``make bench-latency``).

Starts PostgreSQL, Redis and OpenSearch, runs ``cdc run`` (capture + a Redis and an
OpenSearch connector, ``batch_timeout`` 10 ms and 50 ms) and commits 2,000 rows/s
(100 transactions of 20 inserts a second) for 60 s (``BENCH_SCALE`` scales the
duration). Latency is from the moment COMMIT returned to:

- Redis: the key's keyspace notification (``SET`` seen by a subscriber), every row;
- OpenSearch: the document returned by a realtime ``mget`` (indexed: the bulk request
  was acknowledged), polled every 20 ms for one row in ten.

Prints ``name=value`` lines, the headline last. The targets are absolute
(docs/performance.md: p99 ≤ 100 ms Redis, ≤ 300 ms OpenSearch); ``postgres_commit_p99_ms``
is printed beside them as the side-by-side reference of how loaded the machine was.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import redis
from opensearchpy import OpenSearch

from compose.launcher import OpenSearchServer, PostgresServer, RedisServer

SCALE = float(os.environ.get("BENCH_SCALE", "1"))
DURATION_S = max(5.0, 60 * SCALE)
ROWS_PER_TX, TX_PER_S = 20, 100
SEARCH_SAMPLE = 10  # one row in ten is timed in OpenSearch
WARMUP_ROWS = 200


class Clock:
    """Commit and arrival times per row id, shared by the threads (perf_counter)."""

    def __init__(self) -> None:
        self.committed: dict[int, float] = {}
        self.in_redis: dict[int, float] = {}
        self.in_search: dict[int, float] = {}
        self.commit_ms: list[float] = []
        self.lock = threading.Lock()


def pipeline_yaml(dsn: str, workdir: Path, redis_url: str, search_url: str) -> str:
    return f"""
source: {{dsn: "{dsn}", slot: lat, publication: lat, tables: [public.ticks]}}
log: {{backend: file, path: {workdir / 'log'}}}
connectors:
  - {{name: cache, type: redis, topics: [lat.public.ticks], batch_timeout: 10ms,
     config: {{url: "{redis_url}", key_template: "tick:{{key}}"}}}}
  - {{name: search, type: opensearch, topics: [lat.public.ticks], batch_timeout: 50ms,
     config: {{hosts: ["{search_url}"], index: ticks}}}}
"""


def listen_redis(client: redis.Redis, clock: Clock, stop: threading.Event) -> None:
    """Record when each ``tick:<id>`` key is set (keyspace notifications)."""
    client.config_set("notify-keyspace-events", "K$")
    pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    pubsub.psubscribe("__keyspace@0__:tick:*")
    while not stop.is_set():
        message = pubsub.get_message(timeout=0.1)
        if message is not None:
            now = time.perf_counter()
            row = int(message["channel"].rsplit(b":", 1)[1])
            with clock.lock:
                clock.in_redis.setdefault(row, now)
    pubsub.close()


def poll_search(client: OpenSearch, clock: Clock, stop: threading.Event) -> None:
    """Record when each sampled row's document can be read (realtime ``mget``)."""
    while not stop.wait(0.02):
        with clock.lock:
            pending = [row for row in clock.committed
                       if row % SEARCH_SAMPLE == 0 and row not in clock.in_search]
        if not pending or not client.indices.exists(index="ticks"):
            continue
        found = client.mget(index="ticks", body={"ids": [str(r) for r in pending[:500]]},
                            realtime=True, _source=False)
        now = time.perf_counter()
        with clock.lock:
            for doc in found["docs"]:
                if doc.get("found"):
                    clock.in_search.setdefault(int(doc["_id"]), now)


def commit_rows(dsn: str, clock: Clock, first: int, count: int, rate: bool) -> int:
    """Insert ``count`` rows from id ``first``, ``ROWS_PER_TX`` per transaction, paced at
    ``TX_PER_S`` when ``rate``; the next free id."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        started = time.perf_counter()
        for number, start in enumerate(range(first, first + count, ROWS_PER_TX)):
            if rate:
                time.sleep(max(0.0, started + number / TX_PER_S - time.perf_counter()))
            before = time.perf_counter()
            conn.execute("INSERT INTO ticks SELECT g, 'payload ' || g, now() "
                         "FROM generate_series(%s::bigint, %s::bigint) g",
                         (start, start + ROWS_PER_TX - 1))
            now = time.perf_counter()
            with clock.lock:
                clock.commit_ms.append((now - before) * 1000)
                for row in range(start, start + ROWS_PER_TX):
                    clock.committed[row] = now
    return first + count


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out: {what} (see cdc-run.log in the bench's workdir)")
        time.sleep(0.1)


def measure(dsn: str, redis_url: str, search_url: str, workdir: Path) -> Clock:
    """Run ``cdc run`` and the load; the clock with every time recorded."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE ticks (id bigint PRIMARY KEY, payload text, "
                     "created_at timestamptz)")
    config = workdir / "pipeline.yaml"
    config.write_text(pipeline_yaml(dsn, workdir, redis_url, search_url))
    clock, stop = Clock(), threading.Event()
    cache, search = redis.Redis.from_url(redis_url), OpenSearch([search_url], timeout=30)
    threads = [threading.Thread(target=listen_redis, args=(cache, clock, stop)),
               threading.Thread(target=poll_search, args=(search, clock, stop))]
    with (workdir / "cdc-run.log").open("wb") as output:
        proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c", str(config)],
                                stdout=output, stderr=subprocess.STDOUT)
    try:
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        next_id = commit_rows(dsn, clock, 0, WARMUP_ROWS, rate=False)
        wait_for(lambda: len(clock.in_redis) >= WARMUP_ROWS
                 and len(clock.in_search) >= WARMUP_ROWS // SEARCH_SAMPLE, 120, "warm-up")
        with clock.lock:
            clock.committed.clear()
            clock.commit_ms.clear()
        total = int(DURATION_S * TX_PER_S) * ROWS_PER_TX
        commit_rows(dsn, clock, next_id, total, rate=True)
        time.sleep(3.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        cache.close()
        search.close()
    return clock


def main() -> None:
    """Start the servers, measure, print the figures."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    with PostgresServer() as pg, RedisServer() as cache, OpenSearchServer() as search:
        clock = measure(pg.dsn(), cache.url, search.url, workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    redis_ms = [(clock.in_redis[r] - t) * 1000 for r, t in clock.committed.items()
                if r in clock.in_redis]
    search_ms = [(clock.in_search[r] - t) * 1000 for r, t in clock.committed.items()
                 if r in clock.in_search]
    sampled = sum(1 for r in clock.committed if r % SEARCH_SAMPLE == 0)
    print(f"rows={len(clock.committed)}")
    print(f"rows_per_s={len(clock.committed) / DURATION_S:.0f}")
    print(f"redis_rows_missing={len(clock.committed) - len(redis_ms)}")
    print(f"opensearch_rows_missing={sampled - len(search_ms)}")
    print(f"postgres_commit_p99_ms={percentile(clock.commit_ms, 0.99):.1f}")
    print(f"e2e_opensearch_p50_ms={percentile(search_ms, 0.50):.1f}")
    print(f"e2e_redis_p50_ms={percentile(redis_ms, 0.50):.1f}")
    print(f"e2e_redis_p99_ms={percentile(redis_ms, 0.99):.1f}")
    print(f"e2e_opensearch_p99_ms={percentile(search_ms, 0.99):.1f}")


if __name__ == "__main__":
    main()
