"""Values a field cannot index keep their document (real OpenSearch 2.19 semantics):
``index.mapping.ignore_malformed`` on the indices the sink creates, and on an older index
once a truncate replaces it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from opensearchpy import OpenSearch

from connectors.opensearch import OpenSearchSinkConfig
from connectors.opensearch.mapping import ColumnType
from connectors.opensearch.sink import OpenSearchSink
from tests.unit.connectors.sink_events import TableEvents

pytestmark = pytest.mark.integration

TYPES: dict[str, ColumnType] = {
    "id": "pg_catalog.int4", "f": "pg_catalog.float8", "j": "pg_catalog.jsonb",
    "r": "pg_catalog.int4range", "t": "pg_catalog.text",
    "c": {"type": "public.pair", "kind": "composite", "attributes": [
        {"name": "a", "type": "pg_catalog.int4", "kind": "base"},
        {"name": "b", "type": "pg_catalog.jsonb", "kind": "base"}]}}


@pytest.fixture
def client(opensearch_url: str, unique_name: str) -> Iterator[OpenSearch]:
    os_client = OpenSearch(hosts=[opensearch_url], timeout=30)
    yield os_client
    os_client.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                             ignore_unavailable=True)
    os_client.close()


@pytest.fixture
def sink(opensearch_url: str) -> Iterator[OpenSearchSink]:
    def column_types(schema: str, table: str, version: int) -> Mapping[str, ColumnType] | None:
        return TYPES

    config = OpenSearchSinkConfig.model_validate({"hosts": [opensearch_url]})
    opened = OpenSearchSink(config, column_types=column_types)
    opened.open()
    yield opened
    opened.close()


def _sources(client: OpenSearch, alias: str) -> dict[str, dict[str, Any]]:
    client.indices.refresh(index=alias)
    found = client.search(index=alias, body={"size": 100})
    return {hit["_id"]: hit["_source"] for hit in found["hits"]["hits"]}


ROWS = [{"id": 1, "f": "NaN", "j": [1, [2]], "r": {"lower": 1, "upper": None,
                                                   "lower_inc": True, "upper_inc": False,
                                                   "empty": False},
         "t": "x", "c": {"a": 1, "b": "just a string"}},
        {"id": 2, "f": "-Infinity", "j": "s", "r": None, "t": {"not": "text"},
         "c": {"a": "NaN", "b": 3}},
        {"id": 3, "f": 1.5, "j": {"k": "v"}, "r": None, "t": "y", "c": None}]


def test_every_row_is_indexed_with_its_exact_source(sink: OpenSearchSink, client: OpenSearch,
                                                    unique_name: str) -> None:
    table = TableEvents(table=unique_name)
    result = sink.write([table.upsert(row, 100, n) for n, row in enumerate(ROWS)])
    assert result.rejected == []
    assert _sources(client, unique_name) == {str(row["id"]): row for row in ROWS}
    (index,) = client.indices.get(index=unique_name).values()
    assert index["settings"]["index"]["mapping"]["ignore_malformed"] == "true"
    properties = index["mappings"]["properties"]
    assert properties["r"]["properties"]["lower"]["type"] == "long"
    assert properties["c"]["properties"]["b"]["type"] == "flat_object"
    found = client.search(index=unique_name, body={"query": {"range": {"f": {"gt": 1}}}})
    assert [hit["_id"] for hit in found["hits"]["hits"]] == ["3"], "NaN is not indexed"


def test_an_older_index_gets_the_setting_at_its_truncate(sink: OpenSearchSink,
                                                         client: OpenSearch,
                                                         unique_name: str) -> None:
    client.indices.create(index=f"{unique_name}-1", body={
        "aliases": {unique_name: {"is_write_index": True}}})
    table = TableEvents(table=unique_name)
    assert sink.write([table.upsert(ROWS[2], 100)]).rejected == []
    assert sink.write([table.truncate(200)]).rejected == []
    (index,) = client.indices.get(index=unique_name).values()
    assert index["settings"]["index"]["mapping"]["ignore_malformed"] == "true"
    result = sink.write([table.upsert(row, 300, n) for n, row in enumerate(ROWS)])
    assert result.rejected == []
    assert len(_sources(client, unique_name)) == 3
