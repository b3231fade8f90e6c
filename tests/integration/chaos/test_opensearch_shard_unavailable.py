"""An update that left a TOASTed column out, while the document's shard is unavailable
(as right after an OpenSearch restart): the sink retries instead of writing the
document without the column.

Found by the chaos harness: ``mget`` answers such a document with a per-document
``no_shard_available_action_exception``, which the sink took for "not found" and so
indexed the row without its unchanged TOAST columns.

The shard is held unavailable by a clone of the index whose primary no node may hold
(``index.routing.allocation.require._name: nowhere``), with the alias moved onto it. A
new primary honours allocation filters; an existing one does not: closing the index,
requiring "nowhere" and opening it again leaves the primary unassigned for only a few
hundred milliseconds, until OpenSearch force-allocates it to the node that holds its
copy (the test once raced against that, and lost on a loaded machine).
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

NO_NODE = {"index.routing.allocation.require._name": "nowhere"}


@pytest.fixture
def search(opensearch_url: str, unique_name: str) -> Iterator[OpenSearch]:
    client = OpenSearch(hosts=[opensearch_url], timeout=30)
    yield client
    client.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                          ignore_unavailable=True)
    client.close()


def move_to_unassigned_clone(client: OpenSearch, alias: str) -> str:
    """Clone the index behind ``alias`` into ``<alias>-clone``, whose primary no node may
    hold, and move ``alias`` onto it; the clone's name."""
    source = next(iter(client.indices.get_alias(name=alias)))
    clone = f"{alias}-clone"
    client.indices.put_settings(index=source, body={"index.blocks.write": True})
    client.indices.clone(index=source, target=clone, wait_for_active_shards=0,
                         body={"settings": {**NO_NODE, "index.blocks.write": None}})
    client.indices.update_aliases(body={"actions": [
        {"remove": {"index": source, "alias": alias}},
        {"add": {"index": clone, "alias": alias, "is_write_index": True}}]})
    return clone


def primary_allocation(client: OpenSearch, index: str) -> tuple[str, str | None]:
    """The state of ``index``'s primary shard and, while it is unassigned, whether it
    can be allocated (``cluster.allocation_explain``)."""
    explained = client.cluster.allocation_explain(
        body={"index": index, "shard": 0, "primary": True})
    return explained["current_state"], explained.get("can_allocate")


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
        clone = move_to_unassigned_clone(search, unique_name)
        assert primary_allocation(search, clone) == ("unassigned", "no")
        update = [table.upsert({"id": 1, "qty": 2}, 200, unchanged=["body"])]
        with pytest.raises(SinkUnavailableError, match="no_shard_available"):
            sink.write(update)
        search.indices.put_settings(index=clone, body={name: None for name in NO_NODE})
        search.cluster.health(index=clone, wait_for_status="yellow")
        assert primary_allocation(search, clone) == ("started", None)
        assert sink.write(update).rejected == []
        stored = search.get(index=unique_name, id="1")["_source"]
        assert stored == {"id": 1, "qty": 2, "body": body}
    finally:
        sink.close()
