"""End-to-end latency through ``cdc run`` at 2,000 and 10,000 rows/s (``make bench-latency``).

Starts PostgreSQL, Redis and OpenSearch, runs ``cdc run`` (capture + a Redis and an
OpenSearch connector, ``batch_timeout`` 1 ms and 20 ms: a Redis write per few rows is cheap
now; 1 ms to OpenSearch, a bulk request per few rows, falls seconds behind at 10,000
rows/s, while 50 ms put its p50 near 50 ms) and commits, after a warm-up,
two steady phases of 60 s each (``BENCH_SCALE`` scales the duration): 2,000 rows/s (100
transactions of 20 inserts a second), then 10,000 rows/s (100 transactions of 100).
Latency is from the moment COMMIT returned to:

- Redis: the key's keyspace notification (``SET`` seen by a subscriber);
- OpenSearch: the document returned by a realtime ``mget`` (indexed: the bulk request
  was acknowledged), polled every 20 ms.

One row in ten is timed in each (ids ending in 0), so the bench's own listeners stay
light at 10,000 rows/s. Prints p50/p99/p999 per sink and rate, named like
``e2e_redis_p99_ms_2k`` and ``e2e_opensearch_p99_ms_10k``, the headline last. The targets
are absolute (p99 ≤ 20 ms to Redis, ≤ 100 ms to OpenSearch, at both rates);
``postgres_commit_p99_ms_*`` is printed beside them as the side-by-side reference of how
loaded the machine was.
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
from dataclasses import dataclass
from pathlib import Path

import psycopg
import redis
from opensearchpy import OpenSearch

from compose.launcher import OpenSearchServer, PostgresServer, RedisServer

SCALE = float(os.environ.get("BENCH_SCALE", "1"))
DURATION_S = max(5.0, 60 * SCALE)
TX_PER_S = 100
PHASES = (("2k", 20), ("10k", 100))  # (name, rows a transaction): 2,000 and 10,000 rows/s
SAMPLE = 10  # one row in ten (ids ending in 0) is timed in each sink
WARMUP_ROWS = 200


class Clock:
    """Commit and arrival times per row id, shared by the threads (perf_counter)."""

    def __init__(self) -> None:
        self.committed: dict[int, float] = {}  # sampled rows
        self.in_redis: dict[int, float] = {}
        self.in_search: dict[int, float] = {}
        self.unseen: set[int] = set()  # sampled rows OpenSearch did not return yet
        self.commit_ms: list[float] = []
        self.rows = 0
        self.lock = threading.Lock()

    def restart(self) -> None:
        """Forget what was timed so far (the next phase is timed on its own)."""
        with self.lock:
            self.committed.clear()
            self.in_redis.clear()
            self.in_search.clear()
            self.unseen.clear()
            self.commit_ms.clear()
            self.rows = 0


def pipeline_yaml(dsn: str, workdir: Path, redis_url: str, search_url: str) -> str:
    return f"""
source: {{dsn: "{dsn}", slot: lat, publication: lat, tables: [public.ticks]}}
log: {{backend: file, path: {workdir / 'log'}}}
connectors:
  - {{name: cache, type: redis, topics: [lat.public.ticks], batch_timeout: 1ms,
     config: {{url: "{redis_url}", key_template: "tick:{{key}}"}}}}
  - {{name: search, type: opensearch, topics: [lat.public.ticks], batch_timeout: 20ms,
     config: {{hosts: ["{search_url}"], index: ticks}}}}
"""


def listen_redis(client: redis.Redis, clock: Clock, stop: threading.Event) -> None:
    """Record when each sampled ``tick:<id>`` key is set (keyspace notifications)."""
    client.config_set("notify-keyspace-events", "K$")
    pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    pubsub.psubscribe("__keyspace@0__:tick:*0")
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
            pending = sorted(clock.unseen)[:500]
        if not pending or not client.indices.exists(index="ticks"):
            continue
        found = client.mget(index="ticks", body={"ids": [str(r) for r in pending]},
                            realtime=True, _source=False)
        now = time.perf_counter()
        with clock.lock:
            for doc in found["docs"]:
                if doc.get("found"):
                    row = int(doc["_id"])
                    clock.in_search.setdefault(row, now)
                    clock.unseen.discard(row)


def commit_rows(dsn: str, clock: Clock, first: int, count: int, per_tx: int,
                rate: bool) -> int:
    """Insert ``count`` rows from id ``first``, ``per_tx`` per transaction, paced at
    ``TX_PER_S`` when ``rate``; the next free id."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        started = time.perf_counter()
        for number, start in enumerate(range(first, first + count, per_tx)):
            if rate:
                time.sleep(max(0.0, started + number / TX_PER_S - time.perf_counter()))
            before = time.perf_counter()
            conn.execute("INSERT INTO ticks SELECT g, 'payload ' || g, now() "
                         "FROM generate_series(%s::bigint, %s::bigint) g",
                         (start, start + per_tx - 1))
            now = time.perf_counter()
            sampled = range(start + (-start) % SAMPLE, start + per_tx, SAMPLE)
            with clock.lock:
                clock.commit_ms.append((now - before) * 1000)
                clock.rows += per_tx
                for row in sampled:
                    clock.committed[row] = now
                clock.unseen.update(sampled)
    return first + count


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def wait_for(check: Callable[[], bool], timeout: float, what: str,
             proc: subprocess.Popen[bytes]) -> None:
    """Until ``check()``; an error once ``timeout`` passed or ``proc`` exited."""
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None:
            raise RuntimeError(f"cdc run exited with {proc.returncode} before: {what} "
                               "(see cdc-run.log in the bench's workdir)")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out: {what} (see cdc-run.log in the bench's workdir)")
        time.sleep(0.1)


def measure(dsn: str, redis_url: str, search_url: str, workdir: Path
            ) -> dict[str, Phase]:
    """Run ``cdc run``, the warm-up and each phase; what each phase timed."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE ticks (id bigint PRIMARY KEY, payload text, "
                     "created_at timestamptz)")
    config = workdir / "pipeline.yaml"
    config.write_text(pipeline_yaml(dsn, workdir, redis_url, search_url))
    clock, stop = Clock(), threading.Event()
    cache, search = redis.Redis.from_url(redis_url), OpenSearch([search_url], timeout=30)
    threads = [threading.Thread(target=listen_redis, args=(cache, clock, stop)),
               threading.Thread(target=poll_search, args=(search, clock, stop))]
    phases: dict[str, Phase] = {}
    with (workdir / "cdc-run.log").open("wb") as output:
        proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c", str(config)],
                                stdout=output, stderr=subprocess.STDOUT)
    try:
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        next_id = commit_rows(dsn, clock, 0, WARMUP_ROWS, 20, rate=False)
        wait_for(lambda: len(clock.in_redis) >= WARMUP_ROWS // SAMPLE
                 and len(clock.in_search) >= WARMUP_ROWS // SAMPLE, 120, "warm-up", proc)
        for name, per_tx in PHASES:
            clock.restart()
            total = int(DURATION_S * TX_PER_S) * per_tx
            next_id = commit_rows(dsn, clock, next_id, total, per_tx, rate=True)
            time.sleep(3.0)
            with clock.lock:
                phases[name] = Phase.of(clock)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        cache.close()
        search.close()
    return phases


@dataclass(frozen=True, slots=True)
class Phase:
    """What one rate's phase timed: latencies in ms, rows committed, rows not seen."""

    rows: int
    redis_ms: list[float]
    search_ms: list[float]
    commit_ms: list[float]
    redis_missing: int
    search_missing: int

    @classmethod
    def of(cls, clock: Clock) -> Phase:
        redis_ms = [(clock.in_redis[r] - t) * 1000 for r, t in clock.committed.items()
                    if r in clock.in_redis]
        search_ms = [(clock.in_search[r] - t) * 1000 for r, t in clock.committed.items()
                     if r in clock.in_search]
        return cls(clock.rows, redis_ms, search_ms, list(clock.commit_ms),
                   len(clock.committed) - len(redis_ms), len(clock.committed) - len(search_ms))


def main() -> None:
    """Start the servers, measure, print the figures."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    with PostgresServer() as pg, RedisServer() as cache, OpenSearchServer() as search:
        phases = measure(pg.dsn(), cache.url, search.url, workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    headlines = []
    for name, phase in phases.items():
        print(f"rows_{name}={phase.rows}")
        print(f"rows_per_s_{name}={phase.rows / DURATION_S:.0f}")
        print(f"redis_rows_missing_{name}={phase.redis_missing}")
        print(f"opensearch_rows_missing_{name}={phase.search_missing}")
        print(f"postgres_commit_p99_ms_{name}={percentile(phase.commit_ms, 0.99):.1f}")
        for sink, values in (("redis", phase.redis_ms), ("opensearch", phase.search_ms)):
            print(f"e2e_{sink}_p50_ms_{name}={percentile(values, 0.50):.1f}")
            print(f"e2e_{sink}_p999_ms_{name}={percentile(values, 0.999):.1f}")
            headlines.append(f"e2e_{sink}_p99_ms_{name}={percentile(values, 0.99):.1f}")
    for line in headlines:
        print(line)


if __name__ == "__main__":
    main()
