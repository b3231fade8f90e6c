"""``cdc reconcile`` of joined views against real PostgreSQL, OpenSearch and Redis, with
PostgreSQL as the oracle (``join_source``: the joins made in SQL).

A shop (customers, products, orders, order_items) joined into one record per order: a
required, filtered customer lookup, a 2-level nested list (order → items → product) with
a filter on the items, a computed field, and NULL join columns. The documents a correct
connector writes are built here independently, by ``derived.build_record`` over the rows
as the capture reads them (``TableSource``), written into the sinks by hand (the joined
connector is not needed), and reconciled clean; drift made by hand is found exactly and
repaired, so the next run is clean.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
import redis
from opensearchpy import OpenSearch

from cdc.config import PipelineConfig
from cdc.config.loader import load_config
from connectors.contract import version_of
from connectors.reconcile.join_source import JoinedSource
from connectors.reconcile.plan import JoinPlan, plan_joins
from connectors.reconcile.run import TableOutcome, reconcile_join
from connectors.reconcile.source import TableSource, current_lsn
from connectors.redis import scripts
from derived import RowsInMemory, build_record, encode_key
from derived.values import text_of

pytestmark = pytest.mark.integration

SCHEMA = """
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, tier text,
                        active boolean NOT NULL DEFAULT true);
CREATE TABLE products (sku text PRIMARY KEY, title text NOT NULL, price numeric(10, 2),
                       discontinued boolean NOT NULL DEFAULT false, added timestamptz,
                       code char(5));
CREATE TABLE orders (id int PRIMARY KEY, customer_id int, status text NOT NULL,
                     placed timestamptz, total numeric(12, 2), note text);
CREATE TABLE order_items (order_id int NOT NULL, line int NOT NULL, sku text, qty int NOT NULL,
                          price numeric(10, 2), PRIMARY KEY (order_id, line));
INSERT INTO customers VALUES (1, 'Ada', 'gold', true), (2, 'Bob', NULL, false),
                             (3, 'Cy', 'silver', true);
INSERT INTO products VALUES ('9', 'Nine', 9.90, false, '2026-01-02 03:04:05.5+00', 'n9'),
                            ('10', 'Ten', 10.00, false, NULL, NULL),
                            ('A-1', 'Anvil', 120.50, false, '2026-01-01T00:00:00Z', 'anv'),
                            ('OLD', 'Old thing', 1.00, true, NULL, 'old');
INSERT INTO orders VALUES
  (1, 1, 'paid', '2026-03-01 10:00:00.123456+00', 150.30, 'first'),
  (2, NULL, 'paid', NULL, 1.00, 'no customer: no record (required lookup)'),
  (3, 2, 'paid', NULL, 2.00, 'inactive customer: no record (filtered required lookup)'),
  (4, 1, 'draft', NULL, 3.00, 'a draft: no record (root filter)'),
  (5, 3, 'sent', '2026-03-02 00:00:00+00', 0, 'no items'),
  (6, 99, 'paid', NULL, 4.00, 'no such customer: no record'),
  (7, 3, 'paid', NULL, NULL, 'items by sku: 9, 10, A-1, OLD, NULL sku');
INSERT INTO order_items VALUES
  (1, 1, 'A-1', 1, 120.50), (1, 2, '10', 2, 10.00), (1, 3, '9', 1, 9.90),
  (1, 4, NULL, 3, 0.00), (1, 5, '9', 0, 9.90),
  (7, 1, NULL, 1, 1.00), (7, 2, 'OLD', 1, 1.00), (7, 3, 'A-1', 2, 100.00),
  (7, 4, '10', 1, 10.00), (7, 5, '9', 5, 9.00), (7, 6, '9', 1, 9.00), (7, 0, '9.0', 1, 9.00),
  (8, 1, '9', 1, 9.90);
"""

JOIN = """
        - source: public.orders
          target: {name}_orders
          exclude: [note]
          rename: {{placed: placed_at}}
          computed: {{label: "concat(upper(status), ' #', id)"}}
          filter: "status <> 'draft'"
          lookups:
            - name: customer
              source: public.customers
              "on": {{customer_id: id}}
              fields: [id, name, tier]
              filter: "active"
              required: true
          nested:
            - name: items
              source: public.order_items
              "on": {{id: order_id}}
              order_by: [sku]
              exclude: [order_id]
              filter: "qty > 0"
              lookups:
                - name: product
                  source: public.products
                  "on": {{sku: sku}}
                  exclude: [discontinued]
                  filter: "not discontinued"
"""

CONFIG = """
source:
  dsn: {dsn}
  slot: {name}
  publication: {name}
  tables: [public.customers, public.products, public.orders, public.order_items]
log:
  backend: file
  path: {log}
connectors:
  - name: search
    type: opensearch
    topic_pattern: "{name}\\\\..*"
    config:
      hosts: [{opensearch}]
      joins:{join_search}
  - name: cache
    type: redis
    topic_pattern: "{name}\\\\..*"
    config:
      url: {redis}
      key_template: "{name}:{{table}}:{{key}}"
      joins:{join_cache}
  - name: hashes
    type: redis
    topic_pattern: "{name}\\\\..*"
    config:
      url: {redis}
      key_template: "{name}:h:{{table}}:{{key}}"
      value_format: hash
      joins:{join_cache}
"""

ORDERS = ("public", "orders")


@pytest.fixture
def shop(fresh_database: str, unique_name: str, tmp_path: Path, opensearch_url: str,
         redis_url: str) -> Iterator[PipelineConfig]:
    """The shop's tables and publication, and the pipeline file's config."""
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute(SCHEMA.encode())
        conn.execute(f"CREATE PUBLICATION {unique_name} FOR TABLE customers, products, "
                     "orders, order_items".encode())
    path = tmp_path / "pipeline.yaml"
    path.write_text(CONFIG.format(dsn=fresh_database, name=unique_name, log=tmp_path / "log",
                                  opensearch=opensearch_url, redis=redis_url,
                                  join_search=JOIN.format(name=unique_name),
                                  join_cache=JOIN.format(name=unique_name)))
    yield load_config(path)
    cache = redis.Redis.from_url(redis_url)
    for key in cache.scan_iter(match=f"*{unique_name}:*", count=1000):
        cache.delete(key)
    cache.close()
    search = OpenSearch([opensearch_url])
    search.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                          ignore_unavailable=True)
    search.close()


def plans(config: PipelineConfig) -> dict[str, JoinPlan]:
    return {plan.connector.name: plan for plan in plan_joins(config, (), ())}


def built_records(config: PipelineConfig) -> dict[str, dict[str, Any] | None]:
    """``encode_key(order key)`` → the record ``build_record`` makes of the rows as the
    capture reads them (the independent expectation)."""
    join = plans(config)["search"].join
    tables: dict[tuple[str, str], list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for schema, table in join.tables():
        source = TableSource(config.source.conninfo(), schema, table, config.topic_names,
                             config.source.publication)
        try:
            tables[schema, table] = _all_rows(source)
        finally:
            source.close()
    rows = RowsInMemory(tables)
    return {encode_key(key): build_record(join, row, rows) for key, row in tables[ORDERS]}


def _all_rows(source: TableSource) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    read = source.chunk(None, 10_000)
    return [(row.key, row.after) for row in read.rows]


def write_sinks(config: PipelineConfig, records: dict[str, dict[str, Any] | None],
                opensearch_url: str, redis_url: str, version: int) -> None:
    """What a correct joined connector writes: a document per order with a record, a JSON
    value and a hash per order in the caches, each with its version."""
    name = config.source.slot
    search, cache = OpenSearch([opensearch_url]), redis.Redis.from_url(redis_url)
    try:
        for doc_id, record in records.items():
            if record is None:
                continue
            search.index(index=f"{name}_orders", id=doc_id, body=record, version=version,
                         version_type="external")
            cache.set(f"{name}:orders:{doc_id}", orjson.dumps(record))
            cache.set(f"_cdc_version:{name}:orders:{doc_id}", scripts.version_text(version))
            cache.hset(f"{name}:h:orders:{doc_id}", mapping={
                field: text_of(value) for field, value in record.items() if value is not None})
            cache.set(f"_cdc_version:{name}:h:orders:{doc_id}", scripts.version_text(version))
        search.indices.refresh(index=f"{name}_orders")
    finally:
        search.close()
        cache.close()


def run(config: PipelineConfig, connector: str, repair: bool = False) -> TableOutcome:
    return reconcile_join(config, plans(config)[connector], repair=repair, timeout=30,
                          catch_up=lambda lsn: None)  # no running connector to wait for


def kinds(outcome: TableOutcome) -> set[tuple[str, str]]:
    return {(d.kind.value, d.sink_id) for _, d in outcome.findings.differences}


def test_the_oracle_makes_the_records_build_record_makes(shop: PipelineConfig) -> None:
    source = JoinedSource(shop.source.conninfo(), plans(shop)["search"].join,
                          shop.topic_names, shop.source.publication)
    try:
        records = {encode_key(row.key): row.record for read in source.read()
                   for row in read.rows}
    finally:
        source.close()
    assert records == built_records(shop)
    assert sorted(records) == ["1", "2", "3", "4", "5", "6", "7"]  # order 8 has no row
    assert [doc for doc, record in records.items() if record is not None] == ["1", "5", "7"]
    first = records["1"]
    assert first is not None
    assert first["label"] == "PAID #1" and "note" not in first
    assert first["placed_at"].startswith("2026-03-01T10:00:00.123456")
    assert first["total"] == "150.30" and first["customer"] == {
        "id": 1, "name": "Ada", "tier": "gold"}
    assert [(item["line"], item["sku"]) for item in first["items"]] == [
        (3, "9"), (2, "10"), (1, "A-1"), (4, None)]  # numeric text by value, NULL last
    assert first["items"][0]["product"] == {  # char(n) keeps its padding, as captured
        "sku": "9", "title": "Nine", "price": "9.90", "code": "n9   ",
        "added": first["items"][0]["product"]["added"]}
    assert first["items"][0]["product"]["added"].startswith("2026-01-02T03:04:05.5")
    assert first["items"][3]["product"] is None  # a NULL join column joins nothing
    seventh = records["7"]
    assert seventh is not None and seventh["total"] is None
    assert [(item["line"], item["sku"]) for item in seventh["items"]] == [
        (0, "9.0"), (5, "9"), (6, "9"), (4, "10"), (3, "A-1"), (2, "OLD"), (1, None)]
    # (equal numbers, by value: then by the key)
    assert seventh["items"][5]["product"] is None  # the lookup's filter rejects it
    assert records["5"] is not None and records["5"]["items"] == []


def test_clean_sinks_reconcile_clean_and_drift_is_found_and_repaired(
        shop: PipelineConfig, opensearch_url: str, redis_url: str) -> None:
    name = shop.source.slot
    with psycopg.connect(shop.source.conninfo()) as conn:
        written = version_of(current_lsn(conn) - 1, 0)  # as a commit before the reads
    records = built_records(shop)
    write_sinks(shop, records, opensearch_url, redis_url, written)
    for connector in ("search", "cache", "hashes"):
        clean = run(shop, connector)
        assert clean.findings.rows == 7
        assert kinds(clean) == set(), (connector, clean.findings.differences)

    # drift by hand, under versions older than the next read
    search, cache = OpenSearch([opensearch_url]), redis.Redis.from_url(redis_url)
    index = f"{name}_orders"
    first = records["1"]
    assert first is not None
    search.delete(index=index, id="5")                                          # missing
    search.index(index=index, id="1", version=written, version_type="external_gte",
                 body={**first, "items": first["items"][::-1]})                 # different
    search.index(index=index, id="2", version=1, version_type="external",      # filtered
                 body={"id": 2, "status": "paid"})
    search.index(index=index, id="999", version=1, version_type="external",    # no row
                 body={"id": 999})
    search.indices.refresh(index=index)
    prefix = f"{name}:orders"
    cache.set(f"{prefix}:7", orjson.dumps({**first, "customer": None}))       # different
    cache.delete(f"{prefix}:5")                                                 # missing
    cache.set(f"{prefix}:4", b'{"id": 4}')                                      # filtered
    cache.set(f"{prefix}:777", b'{"id": 777}')                                  # no row
    cache.hset(f"{name}:h:orders:1", "status", "lost")                          # different
    search.close()
    cache.close()

    found = run(shop, "search")
    assert kinds(found) == {("missing", "5"), ("different", "1"), ("extra", "2"),
                            ("extra", "999")}, found.findings.differences
    lines = {d.sink_id: d.line("x") for _, d in found.findings.differences}
    assert "items:" in lines["1"] and "the view filters this row out" in lines["2"]
    assert kinds(run(shop, "cache")) == {
        ("different", f"{prefix}:7"), ("missing", f"{prefix}:5"), ("extra", f"{prefix}:4"),
        ("extra", f"{prefix}:777")}
    hashes = run(shop, "hashes")
    assert kinds(hashes) == {("different", f"{name}:h:orders:1")}
    assert "status: \"paid\" in the table, \"lost\" in the sink" in \
        hashes.findings.differences[0][1].detail

    for connector in ("search", "cache", "hashes"):
        repaired = run(shop, connector, repair=True)
        assert repaired.findings.differences and repaired.repairs, connector
        again = run(shop, connector)
        assert kinds(again) == set(), (connector, again.findings.differences)
    held = OpenSearch([opensearch_url])
    try:
        assert held.get(index=f"{name}_orders", id="1")["_source"] == first
        assert held.get(index=f"{name}_orders", id="1")["_version"] > written
    finally:
        held.close()


def test_a_change_in_a_joined_table_shows_in_its_root_records(
        shop: PipelineConfig, opensearch_url: str, redis_url: str) -> None:
    with psycopg.connect(shop.source.conninfo()) as conn:
        written = version_of(current_lsn(conn), 0)
    write_sinks(shop, built_records(shop), opensearch_url, redis_url, written)
    with psycopg.connect(shop.source.conninfo(), autocommit=True) as conn:
        conn.execute("UPDATE products SET title = 'Nine!' WHERE sku = '9'")  # orders 1, 7
        conn.execute("UPDATE customers SET active = false WHERE id = 3")   # 5, 7: no record
    found = run(shop, "search")
    assert kinds(found) == {("different", "1"), ("extra", "5"), ("extra", "7")}
    repaired = run(shop, "search", repair=True)
    assert any("wrote 1 and deleted 2 of 3" in line for line in repaired.repairs), \
        repaired.repairs
    assert kinds(run(shop, "search")) == set()

