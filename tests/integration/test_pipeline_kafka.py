"""The shipped ``compose/pipeline.kafka.yaml`` end to end: ``cdc run`` on the Kafka backend
with its two pattern-subscribed connectors fills OpenSearch and Redis.

The file's names are fixed (slot ``distributary_kafka``, topics ``distributary.*``, index
``kafka_*``, keys ``kafka:*``), so the test clears them before and after; its servers come
through the file's own ``${VAR}`` placeholders.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis
from confluent_kafka.admin import AdminClient
from opensearchpy import OpenSearch
from psycopg import sql

pytestmark = pytest.mark.integration

PIPELINE = Path(__file__).resolve().parents[2] / "compose" / "pipeline.kafka.yaml"
SLOT = "distributary_kafka"
GROUPS = ["search-kafka", "cache-kafka"]


def clear(kafka_bootstrap: str, search: OpenSearch, cache: redis.Redis,
          postgres_dsn: str) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topics = [t for t in admin.list_topics(timeout=30).topics if t.startswith("distributary.")]
    if topics:
        for future in admin.delete_topics(topics, operation_timeout=30).values():
            future.result(30)
        deadline = time.monotonic() + 60
        while set(topics) & set(admin.list_topics(timeout=30).topics):
            assert time.monotonic() < deadline, "topics were not deleted"
            time.sleep(0.2)
    groups = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    for group in set(GROUPS) & groups:
        admin.delete_consumer_groups([group])[group].result(30)
    search.indices.delete(index="kafka_*", expand_wildcards="all", ignore_unavailable=True)
    for key in cache.scan_iter(match="kafka:*"):
        cache.delete(key)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                     "WHERE slot_name = %s AND NOT active", (SLOT,))


@pytest.fixture
def cleared(kafka_bootstrap: str, opensearch_url: str, redis_url: str,
            postgres_dsn: str) -> Iterator[tuple[OpenSearch, redis.Redis]]:
    search, cache = OpenSearch([opensearch_url]), redis.Redis.from_url(redis_url)
    clear(kafka_bootstrap, search, cache, postgres_dsn)
    yield search, cache
    clear(kafka_bootstrap, search, cache, postgres_dsn)


def search_ids(search: OpenSearch, index: str) -> set[int]:
    if not search.indices.exists(index=index):
        return set()
    search.indices.refresh(index=index)
    hits = search.search(index=index, body={"size": 1000, "query": {"match_all": {}}})
    return {int(h["_id"]) for h in hits["hits"]["hits"]}


def cache_ids(cache: redis.Redis, table: str) -> set[int]:
    return {int(key.decode().rsplit(":", 1)[1])
            for key in cache.scan_iter(match=f"kafka:{table}:*")}


def test_shipped_kafka_pipeline_fills_opensearch_and_redis(
        fresh_database: str, kafka_bootstrap: str, opensearch_url: str, redis_url: str,
        cleared: tuple[OpenSearch, redis.Redis]) -> None:
    search, cache = cleared
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        for table in ("customers", "products", "orders"):
            name = sql.Identifier(table)
            conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, name text)").format(name))
            conn.execute(sql.SQL("INSERT INTO {} SELECT g, 'snap ' || g "
                                 "FROM generate_series(1, 20) g").format(name))
    env = {**os.environ, "PG_DSN": fresh_database, "KAFKA_BOOTSTRAP": kafka_bootstrap,
           "OPENSEARCH_URL": opensearch_url, "REDIS_URL": redis_url}
    proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c", str(PIPELINE)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:  # the slot is active once the capture streams
            with psycopg.connect(fresh_database) as conn:
                if conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s "
                                "AND active", (SLOT,)).fetchone():
                    break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "cdc run did not start streaming"
            time.sleep(0.3)
        with psycopg.connect(fresh_database, autocommit=True) as conn:
            for table in ("customers", "products", "orders"):
                name = sql.Identifier(table)
                conn.execute(sql.SQL("INSERT INTO {} SELECT g, 'live ' || g "
                                     "FROM generate_series(21, 30) g").format(name))
                conn.execute(sql.SQL("DELETE FROM {} WHERE id = 1").format(name))
        want = set(range(2, 31))
        deadline = time.monotonic() + 120
        while True:
            found = {"search": {t: search_ids(search, f"kafka_{t}")
                                for t in ("customers", "products", "orders")},
                     "cache": {t: cache_ids(cache, t) for t in ("customers", "products")}}
            if all(ids == want for side in found.values() for ids in side.values()):
                break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, found
            time.sleep(0.5)
        assert cache_ids(cache, "orders") == set(), "the cache connector's pattern excludes orders"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
