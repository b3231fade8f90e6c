"""The OpenSearch sink against a real OpenSearch: versions, deletes, truncates, TOAST, views."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from opensearchpy import OpenSearch

from connectors.contract import SinkEvent, SinkUnavailableError, WriteResult
from connectors.opensearch import OpenSearchSinkConfig
from connectors.opensearch.sink import OpenSearchSink
from tests.unit.connectors.sink_events import TableEvents

pytestmark = pytest.mark.integration

SinkMaker = Callable[..., OpenSearchSink]


@pytest.fixture
def client(opensearch_url: str, unique_name: str) -> Iterator[OpenSearch]:
    """A client; the test's indices (``<unique_name>*``) are deleted afterwards."""
    os_client = OpenSearch(hosts=[opensearch_url], timeout=30)
    yield os_client
    os_client.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                             ignore_unavailable=True)
    os_client.close()


@pytest.fixture
def make_sink(opensearch_url: str, client: OpenSearch) -> Iterator[SinkMaker]:
    """Opens sinks on the test cluster (settings as keyword arguments); closes them after."""
    opened: list[OpenSearchSink] = []

    def make(column_types: Any = None, **settings: Any) -> OpenSearchSink:
        config = OpenSearchSinkConfig.model_validate({"hosts": [opensearch_url], **settings})
        sink = OpenSearchSink(config, column_types=column_types)
        sink.open()
        opened.append(sink)
        return sink

    yield make
    for sink in opened:
        sink.close()


@pytest.fixture
def table(unique_name: str) -> TableEvents:
    return TableEvents(table=unique_name)


def documents(client: OpenSearch, alias: str) -> dict[str, tuple[int, dict[str, Any]]]:
    """``_id`` → (``_version``, ``_source``) of every document behind ``alias``."""
    client.indices.refresh(index=alias)
    found = client.search(index=alias, body={"size": 1000, "version": True})
    return {hit["_id"]: (hit["_version"], hit["_source"]) for hit in found["hits"]["hits"]}


def sources(client: OpenSearch, alias: str) -> dict[str, dict[str, Any]]:
    return {doc_id: source for doc_id, (_, source) in documents(client, alias).items()}


def written(sink: OpenSearchSink, batch: list[SinkEvent]) -> WriteResult:
    result = sink.write(batch)
    assert result.rejected == [], [r.reason for r in result.rejected]
    return result


def test_upserts_and_deletes(make_sink: SinkMaker, client: OpenSearch, table: TableEvents,
                             unique_name: str) -> None:
    sink = make_sink()
    written(sink, [table.upsert({"id": 1, "title": "one"}, 100, op="c"),
                   table.upsert({"id": 2, "title": "two"}, 100, 1, op="c"),
                   table.upsert({"id": 3, "title": "three"}, 100, 2, op="r")])
    written(sink, [table.upsert({"id": 1, "title": "uno"}, 200), table.delete({"id": 2}, 200, 1)])
    docs = documents(client, unique_name)
    assert {k: s for k, (_, s) in docs.items()} == {"1": {"id": 1, "title": "uno"},
                                                   "3": {"id": 3, "title": "three"}}
    assert docs["1"][0] == (200 << 10)  # the document's version is the event's
    assert set(client.indices.get_alias(name=unique_name)) == {f"{unique_name}-1"}


def test_replaying_older_batches_changes_nothing(make_sink: SinkMaker, client: OpenSearch,
                                                 table: TableEvents, unique_name: str) -> None:
    sink = make_sink()
    older = [table.upsert({"id": 1, "title": "old"}, 100), table.upsert({"id": 2, "v": 1}, 100, 1)]
    newer = [table.upsert({"id": 1, "title": "new"}, 200), table.delete({"id": 2}, 200, 1)]
    written(sink, older)
    written(sink, newer)
    after_newer = documents(client, unique_name)
    written(sink, older)  # stale: 409s count as success, the deleted row stays deleted
    written(sink, [older[0], newer[0]])
    assert documents(client, unique_name) == after_newer == {
        "1": (200 << 10, {"id": 1, "title": "new"})}


def test_the_same_batch_twice_is_idempotent(make_sink: SinkMaker, client: OpenSearch,
                                             table: TableEvents, unique_name: str) -> None:
    sink = make_sink()
    batch = [table.upsert({"id": n, "n": n}, 100 + n) for n in range(20)] + [
        table.delete({"id": 5}, 500)]
    written(sink, batch)
    first = documents(client, unique_name)
    written(sink, batch)
    assert documents(client, unique_name) == first
    assert len(first) == 19


def test_truncate_swaps_in_an_empty_index(make_sink: SinkMaker, client: OpenSearch,
                                          table: TableEvents, unique_name: str) -> None:
    sink = make_sink()
    before = [table.upsert({"id": n, "title": f"t{n}"}, 100, n) for n in range(50)]
    written(sink, before)
    truncating = [table.upsert({"id": 99, "title": "gone"}, 150),
                  table.truncate(200), table.upsert({"id": 1, "title": "after"}, 200, 1)]
    written(sink, truncating)
    assert sources(client, unique_name) == {"1": {"id": 1, "title": "after"}}
    assert set(client.indices.get_alias(name=unique_name)) == {f"{unique_name}-2"}
    assert not client.indices.exists(index=f"{unique_name}-1")
    mapping = client.indices.get_mapping(index=unique_name)[f"{unique_name}-2"]["mappings"]
    assert mapping["properties"]["title"]["type"] == "text"  # the mapping moved along
    assert mapping["_meta"]["distributary"]["truncate_version"] == 200 << 10

    written(sink, before)  # older than the truncate: skipped
    written(sink, truncating)  # the truncate again: already done, nothing empties
    assert sources(client, unique_name) == {"1": {"id": 1, "title": "after"}}
    assert set(client.indices.get_alias(name=unique_name)) == {f"{unique_name}-2"}
    # a fresh sink (after a restart) learns the truncate version from the index
    written(make_sink(), before)
    assert sources(client, unique_name) == {"1": {"id": 1, "title": "after"}}


def test_truncate_of_a_table_never_seen(make_sink: SinkMaker, client: OpenSearch,
                                        table: TableEvents, unique_name: str) -> None:
    written(make_sink(), [table.truncate(100), table.upsert({"id": 1}, 100, 1)])
    assert sources(client, unique_name) == {"1": {"id": 1}}


def test_unchanged_toast_columns_are_kept(make_sink: SinkMaker, client: OpenSearch,
                                         table: TableEvents, unique_name: str) -> None:
    sink = make_sink()
    body = "x" * 50_000
    written(sink, [table.upsert({"id": 1, "title": "a", "body": body}, 100, op="c")])
    written(sink, [table.upsert({"id": 1, "title": "b"}, 200, unchanged=["body"])])
    assert sources(client, unique_name)["1"] == {"id": 1, "title": "b", "body": body}
    # in one batch, from the earlier event; with REPLICA IDENTITY FULL, from `before`
    written(sink, [table.upsert({"id": 2, "title": "c", "body": "b2"}, 300, op="c"),
                   table.upsert({"id": 2, "title": "d"}, 300, 1, unchanged=["body"]),
                   table.upsert({"id": 1, "title": "e"}, 300, 2, unchanged=["body"],
                                before={"id": 1, "title": "b", "body": "from before"})])
    docs = sources(client, unique_name)
    assert docs["2"] == {"id": 2, "title": "d", "body": "b2"}
    assert docs["1"] == {"id": 1, "title": "e", "body": "from before"}
    # an older TOAST update replayed changes nothing
    written(sink, [table.upsert({"id": 1, "title": "b"}, 200, unchanged=["body"])])
    assert sources(client, unique_name)["1"]["title"] == "e"


def test_unchanged_toast_columns_through_a_view(make_sink: SinkMaker, client: OpenSearch,
                                                table: TableEvents) -> None:
    source, target = f"public.{table.table}", f"{table.table}_v"
    copied = {"source": source, "target": target, "fields": ["id", "title", "body"],
              "rename": {"body": "text"}, "computed": {"mixed": "concat(title, body)"}}
    sink = make_sink(views=[copied])
    written(sink, [table.upsert({"id": 1, "title": "a", "body": "long"}, 100, op="c")])
    # body is read back from the stored document's `text`, so `mixed` is derived again
    written(sink, [table.upsert({"id": 1, "title": "b"}, 200, unchanged=["body"])])
    assert sources(client, target)["1"] == {"id": 1, "title": "b", "text": "long",
                                            "mixed": "blong"}

    hidden = {"source": source, "target": f"{target}2", "fields": ["id", "title"],
              "computed": {"size": "length(body)", "mixed": "concat(title, body)"}}
    sink = make_sink(views=[hidden])
    written(sink, [table.upsert({"id": 1, "title": "a", "body": "long"}, 100, op="c")])
    # body is not in the document: `mixed` cannot be derived, the event is rejected
    result = sink.write([table.upsert({"id": 1, "title": "b"}, 200, unchanged=["body"])])
    assert [r.reason.split(",")[0] for r in result.rejected] == [
        "computed field 'mixed' reads 'body'"]
    only_body = {**hidden, "computed": {"size": "length(body)"}}
    written(make_sink(views=[only_body]),
            [table.upsert({"id": 1, "title": "c"}, 300, unchanged=["body"])])
    # `size` derives from body alone: its stored value stays
    assert sources(client, f"{target}2")["1"] == {"id": 1, "title": "c", "size": 4}


def test_a_mapping_conflict_rejects_only_its_event(make_sink: SinkMaker, client: OpenSearch,
                                                   table: TableEvents, unique_name: str) -> None:
    sink = make_sink()
    written(sink, [table.upsert({"id": 1, "n": 5}, 100)])
    bad = table.upsert({"id": 2, "n..x": 1}, 200)  # a field name OpenSearch cannot parse
    result = sink.write([bad, table.upsert({"id": 3, "n": 6}, 200, 1),
                         table.delete({"id": 1}, 200, 2)])
    assert [r.event for r in result.rejected] == [bad]
    assert "mapper_parsing_exception" in result.rejected[0].reason
    assert sources(client, unique_name) == {"3": {"id": 3, "n": 6}}


def test_composite_keys(make_sink: SinkMaker, client: OpenSearch, table: TableEvents,
                        unique_name: str) -> None:
    sink = make_sink()
    key = ("order_id", "line")
    written(sink, [table.upsert({"order_id": "7", "line": 1, "sku": "a"}, 100, key=key),
                   table.upsert({"order_id": "7", "line": 2, "sku": "b"}, 100, 1, key=key),
                   table.upsert({"order_id": "a:b", "line": 1, "sku": "c"}, 100, 2, key=key)])
    written(sink, [table.delete({"order_id": "7", "line": 1}, 200)])
    assert sources(client, unique_name) == {
        "7:2": {"order_id": "7", "line": 2, "sku": "b"},
        "a\\:b:1": {"order_id": "a:b", "line": 1, "sku": "c"}}


def test_mappings_from_column_types_and_values(make_sink: SinkMaker, client: OpenSearch,
                                               table: TableEvents, unique_name: str) -> None:
    types = {"id": "pg_catalog.int4", "price": "pg_catalog.numeric",
             "created": "pg_catalog.timestamptz", "title": "pg_catalog.text"}

    def column_types(schema: str, name: str, version: int) -> Mapping[str, str] | None:
        return types if (schema, name) == ("public", table.table) else None

    sink = make_sink(column_types=column_types)
    price = "12345678901234567890.12"
    written(sink, [table.upsert({"id": 1, "price": price, "created": "2026-01-02T03:04:05.5Z",
                                 "title": "Hello world", "meta": {"a": [1, {"b": 2}]}}, 100),
                   table.upsert({"id": 2, "price": "3.50", "title": "x"}, 100, 1)])
    written(sink, [table.upsert({"id": 3, "price": "7", "added": 1.25}, 200)])  # a new column
    properties = client.indices.get_mapping(index=unique_name)[f"{unique_name}-1"][
        "mappings"]["properties"]
    assert properties["price"]["type"] == "keyword"
    assert properties["price"]["fields"]["double"]["type"] == "double"
    assert properties["created"]["type"] == "date"
    assert properties["title"]["type"] == "text"
    assert properties["id"]["type"] == "long"
    assert properties["meta"]["type"] == "flat_object"
    assert properties["added"]["type"] == "double"
    client.indices.refresh(index=unique_name)
    exact = client.search(index=unique_name, body={"query": {"term": {"price": price}}})
    assert [hit["_source"]["price"] for hit in exact["hits"]["hits"]] == [price]
    cheap = client.search(index=unique_name, body={
        "query": {"range": {"price.double": {"lt": 10}}}, "sort": [{"price.double": "asc"}]})
    assert [hit["_id"] for hit in cheap["hits"]["hits"]] == ["2", "3"]


def test_views_filter_and_target(make_sink: SinkMaker, client: OpenSearch,
                                 table: TableEvents) -> None:
    target = f"{table.table}_paid"
    sink = make_sink(views=[{"source": f"public.{table.table}", "target": target,
                             "exclude": ["secret"], "filter": "status = 'paid'",
                             "computed": {"total": "amount * qty"}}])
    written(sink, [table.upsert({"id": 1, "status": "paid", "amount": "2.50", "qty": 3,
                                 "secret": "s"}, 100),
                   table.upsert({"id": 2, "status": "new", "amount": "1", "qty": 1}, 100, 1)])
    assert sources(client, target) == {"1": {"id": 1, "status": "paid", "amount": "2.50",
                                             "qty": 3, "total": "7.50"}}
    written(sink, [table.upsert({"id": 1, "status": "refunded", "amount": "2.50", "qty": 3},
                                200)])  # no longer passes the filter: its document goes
    assert sources(client, target) == {}
    written(sink, [table.upsert({"id": 1, "status": "paid", "amount": "2.50", "qty": 3}, 150)])
    assert sources(client, target) == {}  # an older event cannot bring it back


def test_an_unreachable_cluster_is_transient(unique_name: str) -> None:
    config = OpenSearchSinkConfig.model_validate({"hosts": ["http://127.0.0.1:9"],
                                                  "request_timeout": "2s"})
    with pytest.raises(SinkUnavailableError, match="did not answer while connecting"):
        OpenSearchSink(config).open()
