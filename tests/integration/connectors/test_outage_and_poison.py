"""A dead Redis and a poison document: the connector retries or dead-letters, and goes on.

Outage: a Redis of the test's own (AOF on, so it comes back with its data) is stopped
for a while under load; the capture keeps appending and acknowledging, the connector
retries, and once Redis is back its keys equal the table. Poison: a document OpenSearch
refuses (text for a field mapped ``long``) goes to ``<prefix>.dlq.<connector>`` with
the reason, and the events after it are indexed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import cast

import orjson
import pytest
import redis
from opensearchpy import OpenSearch

from compose.launcher import RedisServer

from .conftest import MakeHarness
from .harness import PipelineHarness, wait_until

pytestmark = pytest.mark.integration

OUTAGE_S = 12.0


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A Redis this test may stop and start again on the same port."""
    with RedisServer(durable=True) as server:
        yield server


def steady_load(harness: PipelineHarness, stop: threading.Event) -> None:
    """About 50 small transactions a second: an insert or an update of ``accounts``."""
    number = 0
    with harness.connect() as conn:
        conn.autocommit = True
        while not stop.is_set():
            number += 1
            conn.execute("INSERT INTO accounts VALUES (%s, %s) ON CONFLICT (id) "
                         "DO UPDATE SET balance = accounts.balance + 1",
                         (number % 400, number))
            time.sleep(0.02)


def cache_rows(client: redis.Redis, name: str) -> dict[int, int]:
    keys = list(client.scan_iter(match=f"{name}:acct:*", count=1000))
    found = {}
    for value in cast(list[bytes | None], client.mget(keys)) if keys else []:
        if value is not None:
            row = orjson.loads(value)
            found[row["id"]] = row["balance"]
    return found


def table_rows(harness: PipelineHarness) -> dict[int, int]:
    return {row[0]: row[1] for row in harness.query("SELECT id, balance FROM accounts")}


def test_redis_outage_under_load_loses_nothing(make_harness: MakeHarness,
                                               own_redis: RedisServer,
                                               unique_name: str) -> None:
    harness = make_harness("CREATE TABLE accounts (id int PRIMARY KEY, balance int)", f"""
  - name: cache
    type: redis
    topics: [{unique_name}.public.accounts]
    batch_timeout: 100ms
    retry: {{initial_backoff: 100ms, max_backoff: 1s}}
    config:
      url: {own_redis.url}
      key_template: "{unique_name}:acct:{{key}}"
      timeout: 1s
""")
    capture = harness.start_capture()
    harness.start_connector("cache")
    client = redis.Redis.from_url(own_redis.url)
    topic = harness.topic("accounts")
    stop_load = threading.Event()
    load = threading.Thread(target=steady_load, args=(harness, stop_load), daemon=True)
    load.start()
    try:
        wait_until(lambda: len(cache_rows(client, unique_name)) > 20, timeout=30,
                   what="the first keys reach Redis")
        own_redis.stop_process()
        logged, acked = harness.end_offsets(topic), capture.stats.acked_lsn
        down_since = time.monotonic()
        # Redis stays down for OUTAGE_S at least, and until the capture has shown that it
        # goes on (100 events logged, a new position acknowledged) and the connector retried
        wait_until(lambda: time.monotonic() - down_since >= OUTAGE_S
                   and harness.end_offsets(topic) > logged + 100
                   and capture.stats.acked_lsn > acked
                   and harness.counter("retries", "cache") > 0,
                   timeout=OUTAGE_S + 60, what=(
                       "during the outage: the log grows by 100 events, the capture "
                       "acknowledges, the connector retries"))
        assert harness.counter("dead_letters", "cache") == 0
        written = harness.counter("events_written", "cache")
        own_redis.start_again()
        wait_until(lambda: harness.counter("events_written", "cache") > written, timeout=60,
                   what="the connector writes to Redis again while the load goes on")
    finally:
        stop_load.set()
        load.join(timeout=10)
    try:
        wait_until(lambda: cache_rows(client, unique_name) == table_rows(harness), timeout=60,
                   what="Redis equals the table after the outage")
        assert not harness.messages(f"{unique_name}.dlq.cache")
    finally:
        client.close()


@pytest.fixture
def search(opensearch_url: str, unique_name: str) -> Iterator[OpenSearch]:
    client = OpenSearch(hosts=[opensearch_url], timeout=30)
    yield client
    client.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                          ignore_unavailable=True)
    client.close()


def indexed_ids(client: OpenSearch, alias: str) -> set[int]:
    if not client.indices.exists(index=alias):
        return set()
    client.indices.refresh(index=alias)
    found = client.search(index=alias, body={"size": 1000, "query": {"match_all": {}}})
    return {int(hit["_id"]) for hit in found["hits"]["hits"]}


def test_a_document_opensearch_refuses_goes_to_the_dead_letter_topic(
        make_harness: MakeHarness, search: OpenSearch, unique_name: str,
        opensearch_url: str) -> None:
    alias = f"{unique_name}_things"
    harness = make_harness("CREATE TABLE things (id int PRIMARY KEY, num int, txt text)", f"""
  - name: search
    type: opensearch
    topics: [{unique_name}.public.things]
    batch_timeout: 100ms
    config:
      hosts: [{opensearch_url}]
      views:
        - source: public.things
          target: {alias}
          fields: [id]
          computed: {{score: "coalesce(num, txt)"}}
""")
    # a user-made index whose mapping refuses text in score (indices the sink creates
    # keep such a value in _source instead)
    search.indices.create(index=f"{alias}-1", body={
        "mappings": {"properties": {"score": {"type": "long", "ignore_malformed": False}}},
        "aliases": {alias: {"is_write_index": True}}})
    harness.start_capture()
    runner = harness.start_connector("search")
    harness.execute("INSERT INTO things VALUES (1, 5, NULL)")
    wait_until(lambda: indexed_ids(search, alias) == {1}, timeout=30,
               what="the first document is indexed")
    harness.execute("INSERT INTO things VALUES (2, NULL, 'not a number')",
                    "INSERT INTO things SELECT g, g, NULL FROM generate_series(3, 10) g")
    harness.execute("INSERT INTO things VALUES (11, 11, NULL)")
    wait_until(lambda: indexed_ids(search, alias) == {1, *range(3, 12)}, timeout=30,
               what="the events after the poison one are indexed")
    letters = [orjson.loads(m.value) for m in harness.messages(f"{unique_name}.dlq.search")]
    assert len(letters) == 1, letters
    letter = letters[0]
    assert letter["key"] == {"id": 2}
    assert letter["event"]["after"]["txt"] == "not a number"
    assert letter["connector"] == "search"
    assert "score" in letter["error"] or "parse" in letter["error"], letter["error"]
    assert letter["source"]["topic"] == harness.topic("things")
    assert harness.counter("dead_letters", "search") == 1
    assert not runner.stopping and not runner.failures
