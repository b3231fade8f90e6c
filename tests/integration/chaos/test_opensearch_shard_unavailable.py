"""An update that left a TOASTed column out, while the document's shard is unavailable
(as right after an OpenSearch restart): the sink retries instead of writing the
document without the column.

Found by the chaos harness: ``mget`` answers such a document with a per-document
``no_shard_available_action_exception``, which the sink took for "not found" and so
indexed the row without its unchanged TOAST columns.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opensearchpy import OpenSearch

from connectors.contract import SinkUnavailableError
from connectors.opensearch import OpenSearchSinkConfig
from connectors.opensearch.sink import OpenSearchSink
from tests.unit.connectors.sink_events import TableEvents

pytestmark = pytest.mark.integration


@pytest.fixture
def search(opensearch_url: str, unique_name: str) -> Iterator[OpenSearch]:
    client = OpenSearch(hosts=[opensearch_url], timeout=30)
    yield client
    client.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                          ignore_unavailable=True)
    client.close()


def move_shards(client: OpenSearch, index: str, node: str | None) -> None:
    """Close ``index``, require its shards on ``node`` (None: anywhere), open it again."""
    client.indices.close(index=index)
    client.indices.put_settings(index=index, body={
        "index.routing.allocation.require._name": node})
    client.indices.open(index=index, wait_for_active_shards=0 if node else 1)


def test_unchanged_toast_waits_for_an_unavailable_shard(
        opensearch_url: str, search: OpenSearch, unique_name: str) -> None:
    table = TableEvents(table=unique_name)
    sink = OpenSearchSink(OpenSearchSinkConfig.model_validate(
        {"hosts": [opensearch_url], "index": "{table}"}))
    sink.open()
    try:
        body = "b" * 10_000
        assert sink.write([table.upsert({"id": 1, "qty": 1, "body": body}, 100,
                                        op="c")]).rejected == []
        index = next(iter(search.indices.get_alias(name=unique_name)))
        move_shards(search, index, "nowhere")
        update = [table.upsert({"id": 1, "qty": 2}, 200, unchanged=["body"])]
        with pytest.raises(SinkUnavailableError, match="no_shard_available"):
            sink.write(update)
        move_shards(search, index, None)
        search.cluster.health(index=index, wait_for_status="yellow")
        assert sink.write(update).rejected == []
        stored = search.get(index=unique_name, id="1")["_source"]
        assert stored == {"id": 1, "qty": 2, "body": body}
    finally:
        sink.close()
