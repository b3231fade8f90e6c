"""The OpenSearch sink follows schema changes: new columns get the mapping of their type.

Real PostgreSQL, capture, log, connector runtime and OpenSearch: columns added mid-stream
are mapped from the schema topic's column types the moment their first document is
written (even when that value is null, or a numeric string a value-based guess would map
as text), so are attributes added to a composite type, and a type change the existing
field cannot hold is a dead letter naming it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from connectors.opensearch.unindexed import UNINDEXED

from .conftest import MakeHarness
from .harness import PipelineHarness, wait_until

pytestmark = pytest.mark.integration

SCHEMA = "CREATE TABLE products (id int PRIMARY KEY, name text, qty int)"


@pytest.fixture
def search(opensearch_url: str, unique_name: str) -> Iterator[OpenSearch]:
    client = OpenSearch(hosts=[opensearch_url], timeout=30)
    yield client
    client.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                          ignore_unavailable=True)
    client.close()


def _connectors(name: str, opensearch_url: str, table: str = "products") -> str:
    return f"""
  - name: search
    type: opensearch
    topics: [{name}.public.{table}]
    batch_timeout: 50ms
    batch_size: 100
    config:
      hosts: [{opensearch_url}]
      index: "{name}_{{table}}"
"""


def _sources(client: OpenSearch, alias: str) -> dict[str, dict[str, Any]]:
    client.indices.refresh(index=alias)
    found = client.search(index=alias, body={"size": 1000})
    return {hit["_id"]: hit["_source"] for hit in found["hits"]["hits"]}


def _wait_for_ids(harness: PipelineHarness, client: OpenSearch, alias: str,
                  ids: set[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}

    def indexed() -> bool:
        nonlocal found
        if not client.indices.exists_alias(name=alias):
            return False
        found = _sources(client, alias)
        return ids <= found.keys()

    wait_until(indexed, timeout=60, what=f"documents {sorted(ids)} in {alias}")
    return found


def _properties(client: OpenSearch, alias: str) -> dict[str, Any]:
    mapping = client.indices.get_mapping(index=alias)
    (index,) = mapping.values()
    properties: dict[str, Any] = index["mappings"]["properties"]
    return properties


def test_new_columns_are_mapped_by_their_type(make_harness: MakeHarness, search: OpenSearch,
                                              unique_name: str, opensearch_url: str) -> None:
    harness = make_harness(SCHEMA, _connectors(unique_name, opensearch_url))
    alias = f"{unique_name}_products"
    harness.start_capture()
    harness.start_connector("search")
    harness.execute("INSERT INTO products VALUES (1, 'one', 5), (2, 'two', 6)")
    _wait_for_ids(harness, search, alias, {"1", "2"})
    assert _properties(search, alias)["qty"] == {"type": "long", "ignore_malformed": True}

    harness.execute(
        "ALTER TABLE products ADD COLUMN price numeric(10,2),"
        " ADD COLUMN added_at timestamptz, ADD COLUMN in_stock boolean,"
        " ADD COLUMN weight float8, ADD COLUMN meta jsonb, ADD COLUMN sku uuid,"
        " ADD COLUMN tags text[], ADD COLUMN code varchar(8) DEFAULT '0042'")
    # the first documents with the new fields: nulls, and a numeric that looks like text
    harness.execute("INSERT INTO products (id, name, qty) VALUES (3, 'three', 7)")
    harness.execute("INSERT INTO products VALUES (4, 'four', 8, 12.50, '2026-11-21 10:00:00+00',"
                    " true, 1.5, '{\"color\": \"red\"}', "
                    "'7b0d3a53-2f7d-4b0e-9a55-5a0c2b8f1e01', '{a,b}', '0007')",
                    "INSERT INTO products (id, name, qty, price) VALUES (5, 'five', 9, 99.99)")
    docs = _wait_for_ids(harness, search, alias, {"3", "4", "5"})
    assert docs["4"]["price"] == "12.50" and docs["3"]["price"] is None
    assert docs["3"]["code"] == "0042"

    properties = _properties(search, alias)
    assert properties["price"] == {"type": "keyword", "fields": {
        "double": {"type": "double", "ignore_malformed": True}}}
    # a date field equal to the index's default (index.mapping.ignore_malformed) may be
    # shown without its own ignore_malformed
    assert properties["added_at"]["type"] == "date"
    assert properties["in_stock"] == {"type": "boolean"}
    assert properties["weight"] == {"type": "double", "ignore_malformed": True}
    assert properties["meta"] == {"type": "flat_object"}
    assert properties["sku"]["type"] == "keyword"
    assert properties["tags"]["type"] == "text"
    assert properties["code"]["type"] == "text", "a varchar is text, never a guessed number"
    ranged = search.search(index=alias, body={
        "query": {"range": {"price.double": {"gte": 50}}}})
    assert [hit["_id"] for hit in ranged["hits"]["hits"]] == ["5"]

    # int → bigint: the long field holds the wider values
    harness.execute("ALTER TABLE products ALTER COLUMN qty TYPE bigint",
                    "UPDATE products SET qty = 1099511627776 WHERE id = 1")
    wait_until(lambda: _sources(search, alias)["1"]["qty"] == 1099511627776, timeout=60,
               what="the bigint value indexed")
    assert _properties(search, alias)["qty"] == {"type": "long", "ignore_malformed": True}


def test_attributes_added_to_a_composite_are_mapped_by_their_type(
        make_harness: MakeHarness, search: OpenSearch, unique_name: str,
        opensearch_url: str) -> None:
    """``ALTER TYPE … ADD ATTRIBUTE`` while streaming: the object of a composite column gets
    the new attributes' mappings from their types (a numeric's text a keyword with a
    double, a timestamp a date), not OpenSearch's dynamic guesses (text for both)."""
    harness = make_harness("CREATE TYPE pair AS (a int, b text);"
                           "CREATE TABLE things (id int PRIMARY KEY, p pair)",
                           _connectors(unique_name, opensearch_url, "things"))
    alias = f"{unique_name}_things"
    harness.start_capture()
    harness.start_connector("search")
    harness.execute("INSERT INTO things VALUES (1, ROW(1, 'one'))")
    _wait_for_ids(harness, search, alias, {"1"})
    assert set(_properties(search, alias)["p"]["properties"]) == {"a", "b"}

    harness.execute("ALTER TYPE pair ADD ATTRIBUTE price numeric(10,2),"
                    " ADD ATTRIBUTE seen_at timestamptz")
    harness.execute("INSERT INTO things VALUES (2, ROW(2, 'two', 12.50,"
                    " '2026-11-30 10:00:00+00'))")
    docs = _wait_for_ids(harness, search, alias, {"2"})
    assert docs["2"]["p"]["price"] == "12.50"

    pair = _properties(search, alias)["p"]["properties"]
    assert pair["a"] == {"type": "long", "ignore_malformed": True}
    assert pair["price"] == {"type": "keyword", "fields": {
        "double": {"type": "double", "ignore_malformed": True}}}
    assert pair["seen_at"]["type"] == "date"
    ranged = search.search(index=alias, body={
        "query": {"range": {"p.price.double": {"gte": 10}}}})
    assert [hit["_id"] for hit in ranged["hits"]["hits"]] == ["2"]


def test_a_column_added_to_a_joined_table_is_mapped_by_its_type(
        make_harness: MakeHarness, search: OpenSearch, unique_name: str,
        opensearch_url: str, tmp_path: Path) -> None:
    """A column added to a lookup's table appears in the joined documents' object
    (``customer.since``) mapped by its type (a date), not by OpenSearch's guess (text)."""
    name = unique_name
    harness = make_harness(
        "CREATE TABLE customers (id int PRIMARY KEY, name text);"
        "CREATE TABLE orders (id int PRIMARY KEY, customer_id int, status text)", f"""
  - name: search
    type: opensearch
    topics: [{name}.public.orders, {name}.public.customers]
    batch_timeout: 50ms
    config:
      hosts: [{opensearch_url}]
      join_state_dir: {tmp_path / "state"}
      joins:
        - source: public.orders
          target: {name}_orders
          lookups:
            - {{name: customer, source: public.customers, on: {{customer_id: id}}}}
""")
    alias = f"{name}_orders"
    harness.start_capture()
    harness.start_connector("search")
    harness.execute("INSERT INTO customers VALUES (1, 'Ada')",
                    "INSERT INTO orders VALUES (10, 1, 'new')")
    _wait_for_ids(harness, search, alias, {"10"})
    customer = _properties(search, alias)["customer"]["properties"]
    assert customer["name"]["type"] == "text" and "since" not in customer

    harness.execute("ALTER TABLE customers ADD COLUMN since date")
    harness.execute("UPDATE customers SET since = '2026-11-30' WHERE id = 1")
    wait_until(lambda: _sources(search, alias)["10"]["customer"].get("since") == "2026-11-30",
               timeout=60, what="the new column in the joined document")
    customer = _properties(search, alias)["customer"]["properties"]
    assert customer["since"]["type"] == "date", customer


def test_a_type_change_the_field_cannot_hold_keeps_the_document(
        make_harness: MakeHarness, search: OpenSearch, unique_name: str,
        opensearch_url: str) -> None:
    """A value the field's mapping cannot index stays in ``_source``, unindexed and
    counted: the row is not dead-lettered (indices ignore malformed values)."""
    harness = make_harness(SCHEMA, _connectors(unique_name, opensearch_url))
    config = harness.config_path.read_text()  # the UPDATE alone writes row 1: no re-read
    harness.config_path.write_text(config.replace(
        "  heartbeat_interval: 1s\n", "  heartbeat_interval: 1s\n"
        "  schema_changes: {default: ignore}\n", 1))
    alias = f"{unique_name}_products"
    harness.start_capture()
    harness.start_connector("search")
    harness.execute("INSERT INTO products VALUES (1, 'one', 5)")
    _wait_for_ids(harness, search, alias, {"1"})
    unindexed = UNINDEXED.labels(alias, "qty")
    before = unindexed._value.get()
    harness.execute("ALTER TABLE products ALTER COLUMN qty TYPE text",
                    "UPDATE products SET qty = 'many' WHERE id = 1",
                    "INSERT INTO products VALUES (2, 'two', '12')")
    docs = _wait_for_ids(harness, search, alias, {"2"})
    assert docs["2"]["qty"] == "12"  # OpenSearch coerces a numeric text into the long field
    wait_until(lambda: _wait_for_ids(harness, search, alias, {"1"})["1"]["qty"] == "many",
               timeout=30, what="the document keeps 'many' in _source")
    search.indices.refresh(index=alias)
    found = search.search(index=alias, body={"query": {"term": {"qty": 5}}})
    assert found["hits"]["total"]["value"] == 0, "'many' replaced the indexed 5"
    assert unindexed._value.get() == before + 1, "the unindexed value is counted"
    assert harness.end_offsets(f"{unique_name}.dlq.search") == 0, "nothing dead-lettered"
