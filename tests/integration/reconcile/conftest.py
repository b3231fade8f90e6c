"""A real ``cdc run`` (PostgreSQL → OpenSearch with a filtering view, and Redis) for the
reconcile tests: the schema, the pipeline file, the fixture, and drift made by hand."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson
import psycopg
import pytest
import redis
from opensearchpy import OpenSearch

from compose.launcher.base import free_port
from tests.processes import start_cdc_run, stop_process

ROWS = 2000
HOT = 1500  # the workload touches ids 1..HOT and inserts ids above NEW_IDS; drift is above HOT
NEW_IDS = 100_000

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
class Pipeline:
    """The running ``cdc run``: its file, database, names and metrics port (if any)."""

    config: Path
    dsn: str
    name: str
    stderr: Path
    process: subprocess.Popen[bytes]
    metrics_port: int | None = None


class StartPipeline(Protocol):
    """The ``start_pipeline`` fixture."""

    def __call__(self, extra: str = "", metrics: bool = False) -> Pipeline: ...


def write_config(path: Path, dsn: str, name: str, opensearch_url: str, redis_url: str,
                 extra: str = "") -> None:
    """The pipeline file: a search index through a view that drops drafts and ``note``,
    a cache, and a cache with a ttl; ``extra``: more top-level sections."""
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
{extra}""")


@pytest.fixture
def start_pipeline(fresh_database: str, unique_name: str, tmp_path: Path, opensearch_url: str,
                   redis_url: str) -> Iterator[StartPipeline]:
    """``start(extra="", metrics=False)``: ``cdc run`` started, its snapshot in Redis."""
    started: list[subprocess.Popen[bytes]] = []

    def start(extra: str = "", metrics: bool = False) -> Pipeline:
        with psycopg.connect(fresh_database, autocommit=True) as conn:
            conn.execute(SCHEMA.encode())
        port = free_port() if metrics else None
        if port is not None:
            extra += f"metrics:\n  port: {port}\n  sample_interval: 500ms\n"
        config = tmp_path / "pipeline.yaml"
        write_config(config, fresh_database, unique_name, opensearch_url, redis_url, extra)
        stderr = tmp_path / "stderr.log"
        process = start_cdc_run(config, stderr)
        started.append(process)
        wait_loaded(redis_url, unique_name, process, stderr)
        return Pipeline(config, fresh_database, unique_name, stderr, process, port)

    try:
        yield start
    finally:
        for process in started:
            stop_process(process)
        cache = redis.Redis.from_url(redis_url)
        for key in cache.scan_iter(match=f"*{unique_name}:*", count=1000):
            cache.delete(key)
        cache.close()
        search = OpenSearch([opensearch_url])
        search.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                              ignore_unavailable=True)
        search.close()


def wait_loaded(redis_url: str, name: str, process: subprocess.Popen[bytes],
                stderr: Path) -> None:
    """Until the snapshot of every row reached the cache."""
    cache = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 120
    try:
        while sum(1 for _ in cache.scan_iter(match=f"{name}:orders:*", count=1000)) < ROWS:
            assert process.poll() is None, stderr.read_text()[-3000:]
            assert time.monotonic() < deadline, "the snapshot did not reach Redis"
            time.sleep(0.5)
    finally:
        cache.close()


def inject_drift(name: str, opensearch_url: str, redis_url: str) -> None:
    """One missing, two different and two extra documents in the index; two different
    values and an extra key in the cache (all above ``HOT``)."""
    search, cache = OpenSearch([opensearch_url]), redis.Redis.from_url(redis_url)
    index, prefix = f"{name}_orders", f"{name}:orders"
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
