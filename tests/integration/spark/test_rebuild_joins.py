"""``cdc replay rebuild-search`` and ``rebuild-cache`` build joined views: the documents and
values equal ``derived.build_record`` over the tables' final rows, computed here from the
events written to the file log (real Spark, OpenSearch and Redis)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import orjson
import pytest
import redis
from click.testing import CliRunner
from opensearchpy import OpenSearch

from cdc.cli import main
from cdc.config import load_config
from cdc.log import Position, Record
from cdc.log.file import FileLog
from connectors.contract import version_of
from connectors.opensearch.config import OpenSearchSinkConfig
from derived import JoinedView, RowsInMemory, build_record, encode_key
from derived.join_build import Keyed
from spark_pipelines.join_gather import JoinedTables, note_ends
from spark_pipelines.join_rebuild import catch_up_joined
from spark_pipelines.source import LogSource
from spark_pipelines.state import load_histories
from tests.integration.connectors import test_joined_views as shop

from .test_replay_materialize import replay

pytestmark = pytest.mark.integration

INT8, TEXT = "pg_catalog.int8", "pg_catalog.text"
NUMERIC = ("pg_catalog.numeric", ((10 << 16) | 2) + 4)
TABLES: dict[str, list[tuple[str, str | tuple[str, int], bool]]] = {
    "customers": [("id", INT8, True), ("name", TEXT, False), ("tier", TEXT, False)],
    "products": [("id", INT8, True), ("title", TEXT, False), ("price", NUMERIC, False)],
    "orders": [("id", INT8, True), ("customer_id", INT8, False), ("status", TEXT, False),
               ("placed_at", "pg_catalog.timestamptz", False)],
    "order_items": [("order_id", INT8, True), ("line", "pg_catalog.int4", True),
                    ("product_id", INT8, False), ("qty", "pg_catalog.int4", False)],
}
JOIN = """
      - source: public.orders
        target: {target}
        exclude: [placed_at]
        computed: {{label: "concat(status, ' #', id)"}}
        lookups:
          - name: customer
            source: public.customers
            "on": {{customer_id: id}}
            fields: [id, name]
        nested:
          - name: items
            source: public.order_items
            "on": {{id: order_id}}
            order_by: [line]
            filter: "qty > 0"
            exclude: [order_id]
            lookups:
              - name: product
                source: public.products
                "on": {{product_id: id}}
                required: true
"""


def _schema_records(prefix: str) -> list[Record]:
    records = []
    for table, columns in TABLES.items():
        value = {"schema": "public", "table": table, "schema_version": 1, "columns": [
            {"name": name, "type": kind if isinstance(kind, str) else kind[0],
             "type_modifier": -1 if isinstance(kind, str) else kind[1], "key": key}
            for name, kind, key in columns]}
        records.append(Record(f"{prefix}._schemas", orjson.dumps(f"public.{table}"),
                              orjson.dumps(value)))
    return records


def _key(table: str, row: dict[str, Any]) -> dict[str, Any]:
    return {name: row[name] for name, _, key in TABLES[table] if key}


def _changes() -> list[tuple[str, str, dict[str, Any]]]:
    """(table, op, row or key) in commit order."""
    at = "2026-11-20T10:00:00.5+00:00"
    return [
        *[("customers", "c", {"id": i, "name": f"customer {i}", "tier": "gold"})
          for i in (1, 2, 3)],
        *[("products", "c", {"id": i, "title": f"product {i}", "price": f"{i}.50"})
          for i in (1, 2, 3, 4)],
        ("orders", "c", {"id": 1, "customer_id": 1, "status": "new", "placed_at": at}),
        ("orders", "c", {"id": 2, "customer_id": 2, "status": "paid", "placed_at": at}),
        ("orders", "c", {"id": 3, "customer_id": 3, "status": "new", "placed_at": at}),
        ("orders", "c", {"id": 4, "customer_id": None, "status": "new", "placed_at": None}),
        ("orders", "c", {"id": 5, "customer_id": 99, "status": "lost", "placed_at": at}),
        ("order_items", "c", {"order_id": 1, "line": 10, "product_id": 2, "qty": 1}),
        ("order_items", "c", {"order_id": 1, "line": 2, "product_id": 1, "qty": 3}),
        ("order_items", "c", {"order_id": 1, "line": 5, "product_id": 3, "qty": 0}),
        ("order_items", "c", {"order_id": 1, "line": 7, "product_id": 42, "qty": 1}),
        ("order_items", "c", {"order_id": 2, "line": 1, "product_id": 4, "qty": 2}),
        ("order_items", "c", {"order_id": 2, "line": 2, "product_id": 1, "qty": 5}),
        ("order_items", "c", {"order_id": 3, "line": 1, "product_id": 1, "qty": 1}),
        ("customers", "u", {"id": 2, "name": "customer two", "tier": "silver"}),
        ("products", "u", {"id": 1, "title": "product one", "price": "1.75"}),
        ("order_items", "d", {"order_id": 2, "line": 2}),
        ("orders", "u", {"id": 1, "customer_id": 1, "status": "paid", "placed_at": at}),
        ("orders", "d", {"id": 3}),
        ("order_items", "u", {"order_id": 2, "line": 1, "product_id": 4, "qty": 4}),
    ]


def write_log(log_dir: Path, prefix: str, changes: list[tuple[str, str, dict[str, Any]]],
              final: dict[str, dict[str, Keyed]], newest: dict[str, int], *,
              first: int = 0) -> None:
    """``changes`` as events in the file log (with the schema records unless ``first``),
    applied to ``final`` (each table's rows: key text → (key, row)); ``newest``: the
    version of each event's position by ``table:key``."""
    records = [] if first else _schema_records(prefix)
    for number, (table, op, row) in enumerate(changes, start=first):
        lsn, seq = 100 + number // 3, number % 3
        key = _key(table, row)
        event: dict[str, Any] = {
            "op": op, "key": key, "before": None, "after": None if op == "d" else row,
            "unchanged": [], "schema_version": 1,
            "source": {"schema": "public", "table": table, "seq": seq}}
        records.append(Record(f"{prefix}.public.{table}", orjson.dumps(key),
                              orjson.dumps(event), Position(lsn, seq), op == "d"))
        if op == "d":
            final[table].pop(encode_key(key), None)
        else:
            final[table][encode_key(key)] = (key, row)
        newest[f"{table}:{encode_key(key)}"] = version_of(lsn, seq)
    log = FileLog(log_dir)
    log.producer().append(records)
    log.close()


def search_documents(client: OpenSearch, alias: str) -> dict[str, tuple[Any, int]]:
    client.indices.refresh(index=alias)
    hits = client.search(index=alias, body={"query": {"match_all": {}}, "size": 100,
                                            "version": True})["hits"]["hits"]
    return {hit["_id"]: (hit["_source"], hit["_version"]) for hit in hits}


def expected(view: JoinedView, final: dict[str, dict[str, Keyed]]) -> dict[str, Any]:
    """Root id → its record, from the final rows with ``RowsInMemory``."""
    rows = RowsInMemory({("public", table): list(found.values())
                         for table, found in final.items()})
    built = {encode_key(key): build_record(view, row, rows)
             for key, row in final["orders"].values()}
    return {key: record for key, record in built.items() if record is not None}


def test_rebuilds_write_the_joined_records(spark: Any, opensearch_url: str, redis_url: str,
                                           unique_name: str, tmp_path: Path) -> None:
    prefix, target = unique_name, f"{unique_name}_orders"
    config_path = tmp_path / "pipeline.yaml"
    config_path.write_text(f"""
source:
  dsn: postgresql://localhost/unused
  slot: {prefix}
  publication: {prefix}
log:
  backend: file
  path: {tmp_path / 'log'}
connectors:
  - name: search
    type: opensearch
    topic_pattern: "{prefix}[.]public[.].*"
    config:
      hosts: [{opensearch_url}]
      verify_certs: false
      joins:{JOIN.format(target=target)}
  - name: cache
    type: redis
    topic_pattern: "{prefix}[.]public[.].*"
    config:
      url: {redis_url}
      key_template: "{prefix}:{{table}}:{{key}}"
      joins:{JOIN.format(target=target)}
""")
    final: dict[str, dict[str, Keyed]] = {table: {} for table in TABLES}
    newest: dict[str, int] = {}
    write_log(tmp_path / "log", prefix, _changes(), final, newest)
    search_config = cast(OpenSearchSinkConfig, load_config(config_path).connectors[0].config)
    view = search_config.joins[0]
    want = expected(view, final)
    # order 1: the null lookup of a missing product 42 drops line 7, qty 0 drops line 5
    assert [item["line"] for item in want["1"]["items"]] == [2, 10]
    assert want["2"]["customer"]["name"] == "customer two" and "3" not in want
    assert want["4"]["customer"] is None and want["5"]["customer"] is None

    cache = redis.Redis.from_url(redis_url)
    cache.set(f"{prefix}:orders:3", b"stale")  # the deleted order's value goes
    client = OpenSearch(hosts=[opensearch_url])

    found = replay("rebuild-search", "-c", str(config_path), "--tables", "public.orders")
    assert found[f"public.orders (joined) -> {target}"][0] == len(want)
    found_documents = search_documents(client, target)
    assert {id_: source for id_, (source, _) in found_documents.items()} == want
    versions = {id_: version for id_, (_, version) in found_documents.items()}
    # the newest contributing event: order 1's update, customer 2's rename then order
    # 2's item update, order 5's own insert
    assert versions["1"] == newest["orders:1"]
    assert versions["2"] == newest["order_items:2:1"] > newest["customers:2"]
    assert versions["5"] == newest["orders:5"]
    assert next(iter(client.indices.get_alias(name=target))).startswith(f"{target}_rebuild_")

    replay("rebuild-cache", "-c", str(config_path), "--tables", "public.orders")
    values = {key.decode().rsplit(":", 1)[1]: orjson.loads(cast(bytes, cache.get(key)))
              for key in cache.scan_iter(match=f"{prefix}:orders:*")}
    assert values == want
    assert int(cast(bytes, cache.get(f"_cdc_version:{prefix}:orders:2"))) == versions["2"]

    # the catch-up: what was appended since the noted end offsets, through the real alias
    source = LogSource.of(load_config(config_path))
    tables = JoinedTables.of(view, load_histories(source), source)
    noted = note_ends(source, tables)
    write_log(tmp_path / "log", prefix, [
        ("customers", "u", {"id": 1, "name": "customer one", "tier": "gold"}),
        ("orders", "d", {"id": 2}),
        ("order_items", "u", {"order_id": 1, "line": 5, "product_id": 3, "qty": 2}),
    ], final, newest, first=len(_changes()))
    counts = catch_up_joined(spark, source, tables, noted, search_config, client)
    assert counts is not None and counts.deleted == 2  # orders 2 and 3
    caught_up = search_documents(client, target)
    assert {id_: source for id_, (source, _) in caught_up.items()} == expected(view, final)
    assert caught_up["1"][1] == newest["order_items:1:5"]


def test_a_rebuild_after_a_random_workload_and_a_kill_makes_the_same_documents(
        fresh_database: str, unique_name: str, tmp_path: Path, opensearch_url: str,
        redis_url: str, spark: Any) -> None:
    """``cdc run`` keeps the joined documents exact through a random workload and a kill
    -9 (``test_joined_views``); then ``cdc replay rebuild-search`` (in process: the
    suite's one local Spark JVM) makes the same documents from the log, behind the alias."""
    with shop.converged_after_a_kill(fresh_database, unique_name, tmp_path, opensearch_url,
                                     redis_url, seed=11, kafka=None) as converged:
        rebuilt = CliRunner().invoke(main, [
            "replay", "rebuild-search", "-c", str(converged.config), "--connector", "search",
            "--no-progress", "--output", str(tmp_path / "spark")])
        assert rebuilt.exit_code == 0, (rebuilt.output[-3000:], rebuilt.exception)
        index = converged.index
        assert f"public.orders (joined) -> {index}" in rebuilt.output, rebuilt.output
        alias = converged.search.indices.get_alias(name=index)
        assert any(name.startswith(f"{index}_rebuild_") for name in alias), alias
        assert shop.search_documents(converged.search, index) == converged.want
        assert shop.joined_field_types(converged.search, index) == shop.JOINED_FIELD_TYPES
