"""A truncate applied after newer rows of the same table keeps those rows.

Found by the chaos harness: a truncate event has the key ``{}``, so it lives in one
partition, while rows inserted after it may sit in other partitions and reach a sink
first (partitions are consumed independently, and a connector restarted after a kill
re-reads from each partition's own committed offset). Applying the truncate then must
not delete them: both sinks delete only what is not newer than the truncate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import redis
from opensearchpy import OpenSearch

from connectors.opensearch import OpenSearchSinkConfig
from connectors.opensearch.sink import OpenSearchSink
from connectors.redis import RedisSinkConfig
from connectors.redis.sink import RedisSink
from tests.unit.connectors.sink_events import TableEvents

pytestmark = pytest.mark.integration


@pytest.fixture
def table(unique_name: str) -> TableEvents:
    return TableEvents(table=unique_name)


def batches(table: TableEvents) -> list[list[Any]]:
    """Rows 1-3 before the truncate (at 200); row 4 after it, applied before it; row 5
    after it, applied after it."""
    return [[table.upsert({"id": n, "v": "old"}, 100, n) for n in (1, 2, 3)],
            [table.upsert({"id": 4, "v": "new"}, 300)],
            [table.upsert({"id": 2, "v": "stale"}, 150)],
            [table.truncate(200)],
            [table.upsert({"id": 5, "v": "new"}, 400)]]


def test_redis_truncate_keeps_rows_newer_than_itself(redis_url: str, table: TableEvents,
                                                     unique_name: str) -> None:
    client: Any = redis.Redis.from_url(redis_url)
    sink = RedisSink(RedisSinkConfig.model_validate(
        {"url": redis_url, "key_template": "{table}:{key}"}))
    sink.open()
    try:
        for batch in batches(table):
            assert sink.write(batch).rejected == []
        keys = sorted(k.decode() for k in client.scan_iter(match=f"{unique_name}:*"))
        assert keys == [f"{unique_name}:4", f"{unique_name}:5"]
        assert orjson.loads(client.get(f"{unique_name}:4")) == {"id": 4, "v": "new"}
        assert client.get(f"_cdc_version:{unique_name}:1") is None  # older versions went
        assert client.get(f"_cdc_version:{unique_name}:4") is not None
        # the truncate replayed (a connector restarted before committing it): no change
        assert sink.write([table.truncate(200)]).rejected == []
        assert client.exists(f"{unique_name}:4") == 1
    finally:
        sink.close()
        doomed = list(client.scan_iter(match=f"*{unique_name}*"))
        if doomed:
            client.unlink(*doomed)
        client.close()


@pytest.fixture
def search(opensearch_url: str, unique_name: str) -> Iterator[OpenSearch]:
    client = OpenSearch(hosts=[opensearch_url], timeout=30)
    yield client
    client.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                          ignore_unavailable=True)
    client.close()


def test_opensearch_truncate_keeps_documents_newer_than_itself(
        opensearch_url: str, search: OpenSearch, table: TableEvents, unique_name: str) -> None:
    sink = OpenSearchSink(OpenSearchSinkConfig.model_validate(
        {"hosts": [opensearch_url], "index": "{table}"}))
    sink.open()
    try:
        for batch in batches(table):
            assert sink.write(batch).rejected == []
        search.indices.refresh(index=unique_name)
        hits = search.search(index=unique_name, body={"query": {"match_all": {}}},
                             version=True)["hits"]["hits"]
        found = {hit["_id"]: (hit["_version"], hit["_source"]) for hit in hits}
        assert found == {"4": (300 << 10, {"id": 4, "v": "new"}),
                         "5": (400 << 10, {"id": 5, "v": "new"})}
    finally:
        sink.close()
