"""The OpenSearch sink's native path (plain batches rendered from the raw events) against
its Python path, the reference, on a real OpenSearch: the same batches through both leave
the same documents at the same versions and count the same unindexable values."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from connectors.contract import SinkEvent
from connectors.opensearch import OpenSearchSinkConfig
from connectors.opensearch.sink import OpenSearchSink
from connectors.opensearch.unindexed import UNINDEXED
from tests.unit.connectors.sink_events import TableEvents

pytestmark = pytest.mark.integration


@pytest.fixture
def client(opensearch_url: str, unique_name: str) -> Iterator[OpenSearch]:
    os_client = OpenSearch(hosts=[opensearch_url], timeout=30)
    yield os_client
    os_client.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                             ignore_unavailable=True)
    os_client.close()


def documents(client: OpenSearch, alias: str) -> dict[str, tuple[int, dict[str, Any]]]:
    client.indices.refresh(index=alias)
    found = client.search(index=alias, body={"size": 1000, "version": True})
    return {hit["_id"]: (hit["_version"], hit["_source"]) for hit in found["hits"]["hits"]}


def batches(table: TableEvents) -> list[list[SinkEvent]]:
    return [
        # new fields: mapped by the Python path
        [table.upsert({"id": n, "n": n, "t": f"row {n}", "at": "2026-01-01T00:00:00Z",
                       "ok": True}, 100, n) for n in range(1, 6)],
        [table.upsert({"id": 1, "n": 10, "t": "é\"\n", "at": "2026-01-02"}, 200),
         table.delete({"id": 2}, 200, 1),
         table.delete({"id": 99}, 200, 2),  # nothing to delete: its tombstone is kept
         table.upsert({"id": 3, "n": 2**63 - 1, "t": "x", "at": None}, 200, 3)],
        [table.upsert({"id": 1, "n": 0, "t": "stale"}, 150),  # older than stored: no-op
         table.upsert({"id": 4, "n": "NaN", "t": "kept"}, 300),  # unindexable, counted
         table.upsert({"id": 5, "ok": "maybe", "t": "kept too"}, 300, 1),  # ignore_malformed
         table.upsert({"id": 6, "n": {"an": "object"}, "t": "six"}, 300, 2),  # counted
         table.upsert({"id": 7, "t": "seven", "at": "infinity"}, 300, 3)],  # counted
    ]


@pytest.mark.parametrize("through_view", [False, True])
def test_both_paths_write_the_same(opensearch_url: str, client: OpenSearch,
                                   unique_name: str, monkeypatch: pytest.MonkeyPatch,
                                   through_view: bool) -> None:
    """Also through a view that passes rows as they are to its target (a joined view's
    records reach their sink so): the native path writes them into the target."""
    results: dict[bool, list[list[tuple[int, str]]]] = {}
    counted: dict[bool, tuple[float, float]] = {}
    python_reads: dict[bool, int] = {}
    for native in (True, False):
        alias = f"{unique_name}_{'native' if native else 'python'}"
        settings: dict[str, Any] = {"hosts": [opensearch_url], "index": alias}
        if through_view:  # the index template names another index: the view's target wins
            settings = {**settings, "index": f"{unique_name}_unused",
                        "views": [{"source": "public.orders", "target": alias}]}
        config = OpenSearchSinkConfig.model_validate(settings)
        sink = OpenSearchSink(config, native=native)
        python_reads[native] = 0
        read = sink._reader.read

        def counting(batch: Any, read: Any = read, native: bool = native) -> Any:
            python_reads[native] += 1
            return read(batch)

        monkeypatch.setattr(sink._reader, "read", counting)
        before = [UNINDEXED.labels(alias, field)._value.get() for field in ("n", "at")]
        sink.open()
        try:
            table = TableEvents(table="orders")
            results[native] = [
                [(r.event.message.offset, r.reason.split(":")[1]) for r in sink.write(b).rejected]
                for b in batches(table)]
        finally:
            sink.close()
        n, at = (UNINDEXED.labels(alias, field)._value.get() - was
                 for field, was in zip(("n", "at"), before, strict=True))
        counted[native] = (n, at)
    assert results[True] == results[False]
    assert results[True] == [[], [], []]
    # "NaN" and an object in the long field; "infinity" in the date field
    assert counted[True] == counted[False] == (2, 1)
    assert python_reads[True] == 1 and python_reads[False] == 3  # only the first: new fields
    native_docs = documents(client, f"{unique_name}_native")
    python_docs = documents(client, f"{unique_name}_python")
    assert native_docs == python_docs
    assert native_docs["1"] == (200 << 10, {"id": 1, "n": 10, "t": "é\"\n",
                                            "at": "2026-01-02"})
    assert sorted(native_docs) == ["1", "3", "4", "5", "6", "7"]
    assert not client.indices.exists(index=f"{unique_name}_unused")  # the view's target
