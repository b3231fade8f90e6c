"""``cdc reconcile`` against a real ``cdc run`` (PostgreSQL → OpenSearch with a filtering
view, and Redis) while a workload writes: clean runs report nothing, drift injected by
hand is reported exactly, ``--repair`` fixes it and the next run is clean."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
import redis
from opensearchpy import OpenSearch

from tests.processes import start_cdc_run, stop_process

ROWS = 2000
HOT = 1500  # the workload touches ids 1..HOT and inserts ids above NEW_IDS; drift is above HOT
NEW_IDS = 100_000
SUMMARY = re.compile(r"reconcile: tables=(\d+) rows=(\d+) missing=(\d+) extra=(\d+) "
                     r"different=(\d+)")

SCHEMA = """
CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL, amount numeric(12, 2),
                     score double precision, placed timestamptz, tags jsonb, note text);
INSERT INTO orders
SELECT i, CASE WHEN i % 10 = 0 THEN 'draft' ELSE 'paid' END, i * 1.25, i / 7.0,
       '2026-01-01T00:00:00Z'::timestamptz + i * interval '1 minute',
       jsonb_build_object('n', i, 'big', 9007199254740993), 'row ' || i
FROM generate_series(1, 2000) AS i;  -- ROWS
"""


@dataclass
class Run:
    code: int
    lines: list[str]
    summary: tuple[int, ...]


@dataclass
class Pipeline:
    config: Path
    dsn: str
    name: str
    stderr: Path

    def reconcile(self, *args: str) -> Run:
        done = subprocess.run([sys.executable, "-m", "cdc.cli", "reconcile", "-c",
                               str(self.config), "--timeout", "60", *args],
                              capture_output=True, text=True, timeout=600)
        match = SUMMARY.search(done.stdout)
        assert match is not None, (done.returncode, done.stdout, done.stderr)
        lines = [line for line in done.stdout.splitlines() if not line.startswith("reconcile:")]
        return Run(done.returncode, lines, tuple(int(g) for g in match.groups()))


def _config(path: Path, dsn: str, name: str, opensearch_url: str, redis_url: str) -> None:
    topic = f"{name}.public.orders"
    path.write_text(f"""
source:
  dsn: {dsn}
  slot: {name}
  publication: {name}
  tables: [public.orders]
  heartbeat_interval: 1s
log:
  backend: file
  path: {path.parent / 'log'}
  partitions: 3
connectors:
  - name: search
    type: opensearch
    topics: [{topic}]
    batch_timeout: 100ms
    config:
      hosts: [{opensearch_url}]
      views:
        - source: public.orders
          target: {name}_orders
          exclude: [note]
          filter: "status <> 'draft'"
  - name: cache
    type: redis
    topics: [{topic}]
    batch_timeout: 100ms
    config:
      url: {redis_url}
      key_template: "{name}:{{table}}:{{key}}"
  - name: expiring
    type: redis
    topics: [{topic}]
    batch_timeout: 100ms
    config:
      url: {redis_url}
      key_template: "{name}:ttl:{{table}}:{{key}}"
      ttl: 1s
""")


class Workload:
    """Updates, inserts and deletes on the hot ids from ``THREADS`` threads."""

    THREADS = 2

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._stop = threading.Event()
        self.counts = [0] * self.THREADS
        self.error: BaseException | None = None
        self._threads = [threading.Thread(target=self._run, args=(n,), daemon=True)
                         for n in range(self.THREADS)]
        self._started = 0.0

    @property
    def transactions(self) -> int:
        return sum(self.counts)

    def rate(self) -> float:
        return self.transactions / (time.monotonic() - self._started)

    def __enter__(self) -> Workload:
        self._started = time.monotonic()
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        assert self.error is None, self.error

    def _run(self, number: int) -> None:
        pick = random.Random(number)
        next_id = NEW_IDS + number * 1_000_000
        inserted: deque[int] = deque()
        try:
            with psycopg.connect(self._dsn, autocommit=True) as conn:
                while not self._stop.is_set():
                    key = pick.randint(1, HOT)
                    action = pick.random()
                    if action < 0.7:
                        conn.execute("UPDATE orders SET status = %s, amount = amount + 1, "
                                     "score = random() WHERE id = %s",
                                     (pick.choice(["paid", "sent", "draft"]), key))
                    elif action < 0.85:
                        next_id += 1
                        conn.execute("INSERT INTO orders VALUES (%s, 'new', 1.5, 0.1, now(), "
                                     "'[1, 2]', 'new row')", (next_id,))
                        inserted.append(next_id)
                    elif inserted:
                        conn.execute("DELETE FROM orders WHERE id = %s", (inserted.popleft(),))
                    self.counts[number] += 1
                    time.sleep(0.002)
        except BaseException as exc:  # reported by __exit__
            self.error = exc


@pytest.fixture
def pipeline(fresh_database: str, unique_name: str, tmp_path: Path, opensearch_url: str,
             redis_url: str) -> Iterator[Pipeline]:
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute(SCHEMA.encode())
    config = tmp_path / "pipeline.yaml"
    _config(config, fresh_database, unique_name, opensearch_url, redis_url)
    stderr = tmp_path / "stderr.log"
    process = start_cdc_run(config, stderr)
    cache = redis.Redis.from_url(redis_url)
    try:
        _wait_loaded(cache, unique_name, process, stderr)
        yield Pipeline(config, fresh_database, unique_name, stderr)
    finally:
        stop_process(process)
        for key in cache.scan_iter(match=f"*{unique_name}:*", count=1000):
            cache.delete(key)
        cache.close()
        search = OpenSearch([opensearch_url])
        search.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                              ignore_unavailable=True)
        search.close()


def _wait_loaded(cache: redis.Redis, name: str, process: subprocess.Popen[bytes],
                 stderr: Path) -> None:
    deadline = time.monotonic() + 120
    while sum(1 for _ in cache.scan_iter(match=f"{name}:orders:*", count=1000)) < ROWS:
        assert process.poll() is None, stderr.read_text()[-3000:]
        assert time.monotonic() < deadline, "the snapshot did not reach Redis"
        time.sleep(0.5)


def _inject_drift(pipeline: Pipeline, opensearch_url: str, redis_url: str) -> None:
    search, cache = OpenSearch([opensearch_url]), redis.Redis.from_url(redis_url)
    index, prefix = f"{pipeline.name}_orders", f"{pipeline.name}:orders"
    search.delete(index=index, id="1601")                                    # missing
    stale = search.get(index=index, id="1801")  # older content under the same version
    search.index(index=index, id="1801", version=stale["_version"], version_type="external_gte",
                 body={**stale["_source"], "status": "stale"})
    search.index(index=index, id="999999", version=1, version_type="external",  # extra
                 body={"id": 999999, "status": "paid"})
    # a draft row the view filters out (its tombstone has a snapshot version, as 1901 has)
    snapshot_version = search.get(index=index, id="1901")["_version"]
    search.index(index=index, id="1900", version=snapshot_version + 1, version_type="external",
                 body={"id": 1900, "status": "draft"})
    search.indices.refresh(index=index)
    raw: Any = cache.get(f"{prefix}:1701")
    value = orjson.loads(raw or b"{}")
    cache.set(f"{prefix}:1701", orjson.dumps({**value, "note": "changed by hand"}))  # different
    cache.set(f"{prefix}:1851", orjson.dumps({**value, "id": 1851}))       # stale value + version
    cache.set(f"_cdc_version:{prefix}:1851", "00000000000000000005")
    cache.set(f"{prefix}:888888", b'{"id": 888888}')                              # extra
    search.close()
    cache.close()


def _kinds(run: Run) -> set[tuple[str, str]]:
    found = set()
    for line in run.lines:
        match = re.match(r"(missing|extra|different) public\.orders (\S+) (?:index \S+|redis) "
                         r"(\S+?): ", line)
        assert match is not None, line
        found.add((match.group(1), f"{match.group(2)} {match.group(3)}"))
    return found


def test_reconcile_reports_drift_exactly_and_repairs_it(
        pipeline: Pipeline, opensearch_url: str, redis_url: str) -> None:
    prefix = f"{pipeline.name}:orders"
    with Workload(pipeline.dsn) as workload:
        time.sleep(2)
        for _ in range(10):  # no false positive under load
            clean = pipeline.reconcile()
            assert (clean.code, clean.lines) == (0, []), (clean, pipeline.stderr)
            assert clean.summary[:1] == (1,) and clean.summary[2:] == (0, 0, 0)
            assert clean.summary[1] >= ROWS - HOT
        _inject_drift(pipeline, opensearch_url, redis_url)
        drift = pipeline.reconcile()
        assert drift.code == 1, drift
        assert _kinds(drift) == {
            ("missing", "search 1601"), ("different", "search 1801"),
            ("extra", "search 999999"), ("extra", "search 1900"),
            ("different", f"cache {prefix}:1701"), ("different", f"cache {prefix}:1851"),
            ("extra", f"cache {prefix}:888888")}, drift.lines
        assert drift.summary[2:] == (1, 3, 3), drift
        assert any("the view filters this row out" in line for line in drift.lines)
        assert any("note: \"row 1701\" in the table, \"changed by hand\" in the sink" in line
                   for line in drift.lines)
        repaired = pipeline.reconcile("--repair")
        assert repaired.code == 1 and repaired.summary[2:] == (1, 3, 3), repaired
        assert any(line.startswith("repair: requested an incremental snapshot")
                   for line in repaired.lines)
        deadline, after = time.monotonic() + 120, repaired
        while time.monotonic() < deadline:
            after = pipeline.reconcile()
            if after.code == 0:
                break
            time.sleep(2)
        assert after.code == 0 and after.summary[2:] == (0, 0, 0), after
        assert workload.rate() > 300, workload.rate()
