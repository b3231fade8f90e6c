"""Smoke test: the launched OpenSearch indexes, versions, searches, aliases and bulk-loads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConflictError
from opensearchpy.helpers import bulk

pytestmark = pytest.mark.integration


@pytest.fixture
def client(opensearch_url: str, unique_name: str) -> Iterator[Any]:
    """A client whose test index (named ``unique_name``) is deleted afterwards."""
    os_client = OpenSearch(hosts=[opensearch_url], timeout=30)
    yield os_client
    os_client.indices.delete(index=unique_name, ignore_unavailable=True)
    os_client.close()


def test_external_version_round_trip(client: Any, unique_name: str) -> None:
    index = unique_name
    created = client.index(index=index, id="42", body={"title": "hello distributary"},
                           version=5, version_type="external")
    assert (created["result"], created["_version"]) == ("created", 5)
    client.indices.refresh(index=index)

    hits = client.search(index=index, body={"query": {"match": {"title": "distributary"}}})
    assert hits["hits"]["total"]["value"] == 1
    assert hits["hits"]["hits"][0]["_id"] == "42"
    assert hits["hits"]["hits"][0]["_source"] == {"title": "hello distributary"}

    with pytest.raises(ConflictError) as stale:
        client.index(index=index, id="42", body={"title": "stale"},
                     version=4, version_type="external")
    assert stale.value.status_code == 409
    current = client.get(index=index, id="42")
    assert (current["_version"], current["_source"]["title"]) == (5, "hello distributary")


def test_bulk_through_an_alias(client: Any, unique_name: str) -> None:
    index, alias = unique_name, f"{unique_name}_alias"
    client.indices.create(index=index, body={"settings": {"number_of_replicas": 0}})
    client.indices.put_alias(index=index, name=alias)
    actions = [{"_index": alias, "_id": str(n), "_source": {"n": n}} for n in range(50)]
    indexed, errors = bulk(client, actions, refresh=True)
    assert (indexed, errors) == (50, [])

    assert client.count(index=alias)["count"] == 50
    found = client.search(index=alias, body={"query": {"range": {"n": {"gte": 45}}}, "size": 10})
    assert sorted(hit["_source"]["n"] for hit in found["hits"]["hits"]) == [45, 46, 47, 48, 49]
    assert client.cluster.health(index=index)["status"] == "green"
