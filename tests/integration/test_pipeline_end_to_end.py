"""The main job end to end: ``cdc run`` keeps Redis and OpenSearch equal to PostgreSQL.

Real PostgreSQL, Redis and OpenSearch; the capture and both connectors in one
``cdc run`` process; a mixed workload; then row-for-row comparison; then SIGTERM.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import redis
from opensearchpy import OpenSearch

from tests.processes import stop_or_fail


def write_config(path: Path, dsn: str, name: str, opensearch_url: str, redis_url: str) -> None:
    path.write_text(f"""
source:
  dsn: {dsn}
  slot: {name}
  publication: {name}
  tables: [public.customers]
log:
  backend: file
  path: {path.parent / 'log'}
connectors:
  - name: search
    type: opensearch
    topics: [{name}.public.customers]
    batch_timeout: 200ms
    config:
      hosts: [{opensearch_url}]
      index: "{name}_{{table}}"
  - name: cache
    type: redis
    topics: [{name}.public.customers]
    batch_timeout: 200ms
    config:
      url: {redis_url}
      key_template: "{name}:{{table}}:{{key}}"
      value_format: json
""")


def workload(dsn: str) -> None:
    rng = random.Random(3)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO customers SELECT g, 'name ' || g, g * 1.25, now() "
                     "FROM generate_series(1, 300) g")
        for _ in range(200):
            row = rng.randint(1, 300)
            action = rng.random()
            if action < 0.6:
                conn.execute("UPDATE customers SET name = %s, balance = balance + 1 "
                             "WHERE id = %s", (f"renamed {rng.randint(0, 9999)}", row))
            elif action < 0.8:
                conn.execute("DELETE FROM customers WHERE id = %s", (row,))
            else:
                conn.execute("INSERT INTO customers VALUES (%s, 'new', 0, now()) "
                             "ON CONFLICT (id) DO NOTHING", (300 + row,))


def expected_rows(dsn: str) -> dict[int, dict[str, Any]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT id, name, balance::text FROM customers").fetchall()
    return {r[0]: {"name": r[1], "balance": r[2]} for r in rows}


def redis_rows(client: redis.Redis, name: str) -> dict[int, dict[str, Any]]:
    found = {}
    for key in client.scan_iter(match=f"{name}:customers:*"):
        value: Any = client.get(key)
        if value is not None:
            row = json.loads(value)
            found[int(row["id"])] = {"name": row["name"], "balance": row["balance"]}
    return found


def search_rows(client: OpenSearch, index: str) -> dict[int, dict[str, Any]]:
    client.indices.refresh(index=index)
    hits = client.search(index=index, body={"query": {"match_all": {}}, "size": 10_000})
    return {int(h["_source"]["id"]): {"name": h["_source"]["name"],
                                      "balance": h["_source"]["balance"]}
            for h in hits["hits"]["hits"]}


def test_cdc_run_keeps_redis_and_opensearch_equal_to_postgres(
        fresh_database: str, unique_name: str, tmp_path: Path, opensearch_url: str,
        redis_url: str) -> None:
    database = fresh_database
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, "
                     "balance numeric(12,2), updated_at timestamptz)")
    config = tmp_path / "pipeline.yaml"
    write_config(config, database, unique_name, opensearch_url, redis_url)
    proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    cache = redis.Redis.from_url(redis_url)
    search = OpenSearch([opensearch_url])
    try:
        deadline = time.monotonic() + 60
        while True:  # the slot exists once the capture streams
            with psycopg.connect(database) as conn:
                if conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s "
                                "AND active", (unique_name,)).fetchone():
                    break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "cdc run did not start streaming"
            time.sleep(0.2)
        workload(database)
        want = expected_rows(database)
        deadline = time.monotonic() + 90
        while True:
            got_cache = redis_rows(cache, unique_name)
            index = f"{unique_name}_customers"
            got_search = search_rows(search, index) if search.indices.exists(index=index) else {}
            if got_cache == want and got_search == want:
                break
            assert time.monotonic() < deadline, (
                f"not converged: cache {len(got_cache)}/{len(want)} rows, "
                f"search {len(got_search)}/{len(want)} rows")
            time.sleep(0.5)
    finally:
        code = stop_or_fail(proc)
        cache.close()
    assert code == 0, "cdc run stops cleanly on SIGTERM"
