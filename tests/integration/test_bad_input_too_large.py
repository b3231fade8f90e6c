"""Values too large for a sink go to the dead-letter topic with the reason; the
connector neither crashes nor gets stuck, and the events after them are written.

OpenSearch: a ``numeric`` is indexed as a ``keyword`` (every digit kept), and Lucene
refuses a term over 32,766 bytes; PostgreSQL allows 131,072 digits. Redis: a value over
the sink's ``max_value_bytes``, set like the server's ``proto-max-bulk-len`` (1 MiB on a
Redis of the test's own; Redis drops the connection on a larger value, which a client
cannot tell from an outage).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import redis
from opensearchpy import OpenSearch

from compose.launcher import RedisServer
from tests.integration.connectors.conftest import MakeHarness, make_harness
from tests.integration.connectors.harness import PipelineHarness, wait_until

pytestmark = pytest.mark.integration
__all__ = ["make_harness"]  # the fixture, used by name


def letters(harness: PipelineHarness, connector: str, prefix: str) -> list[dict[str, Any]]:
    return [orjson.loads(m.value) for m in harness.messages(f"{prefix}.dlq.{connector}")]


@pytest.fixture
def search(opensearch_url: str, unique_name: str) -> Iterator[OpenSearch]:
    client = OpenSearch(hosts=[opensearch_url], timeout=30)
    yield client
    client.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                          ignore_unavailable=True)
    client.close()


def indexed(client: OpenSearch, alias: str) -> set[int]:
    if not client.indices.exists(index=alias):
        return set()
    client.indices.refresh(index=alias)
    hits = client.search(index=alias, body={"size": 100, "query": {"match_all": {}}})
    return {int(hit["_id"]) for hit in hits["hits"]["hits"]}


def test_a_numeric_too_long_for_an_opensearch_keyword_is_dead_lettered(
        make_harness: MakeHarness, search: OpenSearch, unique_name: str,
        opensearch_url: str) -> None:
    harness = make_harness("CREATE TABLE amounts (id int PRIMARY KEY, amount numeric)", f"""
  - name: search
    type: opensearch
    topics: [{unique_name}.public.amounts]
    batch_timeout: 100ms
    config:
      hosts: [{opensearch_url}]
      index: "{unique_name}_{{table}}"
""")
    harness.start_capture()
    runner = harness.start_connector("search")
    harness.execute("INSERT INTO amounts VALUES (1, 1.5)")
    alias = f"{unique_name}_amounts"
    wait_until(lambda: indexed(search, alias) == {1}, timeout=30, what="the first row")
    harness.execute("INSERT INTO amounts VALUES (2, repeat('9', 40000)::numeric)",
                    "INSERT INTO amounts VALUES (3, 2.5)")
    wait_until(lambda: indexed(search, alias) == {1, 3}, timeout=30,
               what="the row after the too large one")
    wait_until(lambda: bool(letters(harness, "search", unique_name)), timeout=30,
               what="the dead letter")
    found = letters(harness, "search", unique_name)
    assert len(found) == 1, found
    assert found[0]["key"] == {"id": 2}
    assert "immense term" in found[0]["error"] and "amount" in found[0]["error"], found[0]
    assert not runner.stopping and not runner.failures


@pytest.fixture
def small_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        client.config_set("proto-max-bulk-len", 1024 * 1024)
        client.close()
        yield server


def test_a_value_over_the_redis_bulk_limit_is_dead_lettered(
        make_harness: MakeHarness, small_redis: RedisServer, unique_name: str) -> None:
    harness = make_harness("CREATE TABLE blobs (id int PRIMARY KEY, body text)", f"""
  - name: cache
    type: redis
    topics: [{unique_name}.public.blobs]
    batch_timeout: 100ms
    retry: {{initial_backoff: 100ms, max_backoff: 500ms}}
    config:
      url: {small_redis.url}
      key_template: "blob:{{key}}"
      max_value_bytes: 1MiB
""")
    harness.start_capture()
    runner = harness.start_connector("cache")
    client = redis.Redis.from_url(small_redis.url)
    harness.execute("INSERT INTO blobs VALUES (1, 'small')")
    wait_until(lambda: client.exists("blob:1") == 1, timeout=30, what="the first row")
    harness.execute("INSERT INTO blobs VALUES (2, repeat('x', 2 * 1024 * 1024))",
                    "INSERT INTO blobs VALUES (3, 'after')")
    wait_until(lambda: client.exists("blob:3") == 1, timeout=60,
               what="the row after the too large one")
    assert client.exists("blob:2") == 0
    wait_until(lambda: bool(letters(harness, "cache", unique_name)), timeout=30,
               what="the dead letter")
    found = letters(harness, "cache", unique_name)
    assert len(found) == 1, found
    assert found[0]["key"] == {"id": 2}
    assert "'blob:2' is 2097" in found[0]["error"], found[0]
    assert "over max_value_bytes (1048576)" in found[0]["error"], found[0]
    assert not runner.stopping and not runner.failures
    client.close()
