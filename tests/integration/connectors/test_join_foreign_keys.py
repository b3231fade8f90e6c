"""``on: foreign_key``: joined views take their join columns from PostgreSQL's foreign
keys, read when a command starts; a missing or ambiguous key is a config error."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
import redis

from cdc.config import PipelineConfig, load_config
from cdc.errors import ConfigError
from connectors.joins.foreign_keys import resolve_foreign_keys
from derived import JoinedView

SCHEMA = """
CREATE TABLE warehouses (country text, code int, city text, PRIMARY KEY (country, code));
CREATE TABLE customers (id int PRIMARY KEY, name text);
CREATE TABLE products (id int PRIMARY KEY, title text, wh_country text, wh_code int,
                       FOREIGN KEY (wh_code, wh_country) REFERENCES warehouses (code, country));
CREATE TABLE orders (id int PRIMARY KEY, customer_id int REFERENCES customers, status text);
CREATE TABLE order_items (id int PRIMARY KEY, order_id int REFERENCES orders,
                          product_id int REFERENCES products, line int);
CREATE TABLE notes (id int PRIMARY KEY, order_id int, body text);
CREATE TABLE transfers (id int PRIMARY KEY, from_id int REFERENCES customers,
                        to_id int REFERENCES customers);
"""

# on: unquoted, as users write it (YAML 1.1 reads the key as true)
JOINS = """
      joins:
        - source: public.orders
          target: {target}
          key_template: "{target}:{{key}}"
          lookups:
            - {{name: customer, source: public.customers, on: foreign_key}}
          nested:
            - name: items
              source: public.order_items
              on: foreign_key
              order_by: [line]
              lookups:
                - name: product
                  source: public.products
                  on: foreign_key
                  lookups:
                    - {{name: warehouse, source: public.warehouses, on: foreign_key}}
"""

TABLES = ("warehouses", "customers", "products", "orders", "order_items")


def write_config(path: Path, dsn: str, name: str, redis_url: str, joins: str) -> None:
    path.write_text(f"""
source:
  dsn: {dsn}
  slot: {name}
  publication: {name}
  tables: [{", ".join(f"public.{table}" for table in TABLES)}]
log:
  backend: file
  path: {path.parent / 'log'}
connectors:
  - name: cache
    type: redis
    topics: [{", ".join(f"{name}.public.{table}" for table in TABLES)}]
    batch_timeout: 100ms
    config:
      url: {redis_url}
      join_state_dir: {path.parent / 'state'}
{joins}""")


def joined_view(config: PipelineConfig) -> JoinedView:
    views: tuple[JoinedView, ...] = getattr(config.connectors[0].config, "joins", ())
    return views[0]


def test_the_foreign_keys_give_every_level_its_columns(
        fresh_database: str, unique_name: str, tmp_path: Path) -> None:
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute(SCHEMA)
    path = tmp_path / "pipeline.yaml"
    write_config(path, fresh_database, unique_name, "redis://127.0.0.1:1",
                 JOINS.format(target="orders"))
    loaded = load_config(path)
    with pytest.raises(ValueError, match="foreign_key"):
        joined_view(loaded).lookups[0].join_on()  # not read from the database yet
    view = joined_view(resolve_foreign_keys(loaded))
    assert view.lookups[0].on == {"customer_id": "id"}  # orders → customers
    items = view.nested[0]
    assert items.on == {"id": "order_id"}  # order_items → orders, from the parent's side
    product = items.lookups[0]
    assert product.on == {"product_id": "id"}
    # a composite key: the key's own column order, each column to the one it references
    assert product.lookups[0].on == {"wh_code": "code", "wh_country": "country"}
    assert items.order_by == ("line",) and items.name == "items"


def test_a_missing_or_ambiguous_foreign_key_names_the_level_and_the_keys(
        fresh_database: str, unique_name: str, tmp_path: Path) -> None:
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute(SCHEMA)
    path = tmp_path / "pipeline.yaml"
    write_config(path, fresh_database, unique_name, "redis://127.0.0.1:1", """
      joins:
        - source: public.transfers
          target: transfers
          lookups:
            - {name: sender, source: public.customers, on: foreign_key}
        - source: public.orders
          target: orders
          nested:
            - {name: notes, source: public.notes, on: foreign_key}
            - {name: items, source: public.order_items, on: {id: order_id}}
""")
    with pytest.raises(ConfigError) as raised:
        resolve_foreign_keys(load_config(path))
    problems = {problem.path: problem.message for problem in raised.value.problems}
    assert set(problems) == {"connectors[0].config.joins[0].lookups[0].on",
                             "connectors[0].config.joins[1].nested[0].on"}
    ambiguous = problems["connectors[0].config.joins[0].lookups[0].on"]
    assert "2 foreign keys (transfers_from_id_fkey, transfers_to_id_fkey)" in ambiguous
    assert "declare the columns" in ambiguous
    assert "public.notes has no foreign key referencing public.orders" in problems[
        "connectors[0].config.joins[1].nested[0].on"]


def test_an_unreachable_database_is_a_config_error_without_the_password(
        tmp_path: Path, unique_name: str) -> None:
    path = tmp_path / "pipeline.yaml"
    dsn = "postgresql://someone:hunter2secret@127.0.0.1:1/nowhere?connect_timeout=2"
    write_config(path, dsn, unique_name, "redis://127.0.0.1:1", JOINS.format(target="orders"))
    with pytest.raises(ConfigError) as raised:
        resolve_foreign_keys(load_config(path))
    assert [problem.path for problem in raised.value.problems] == ["source.dsn"]
    assert "on: foreign_key needs the source database" in str(raised.value)
    assert "hunter2secret" not in str(raised.value)


def test_cdc_run_keeps_records_joined_on_foreign_keys(
        fresh_database: str, unique_name: str, tmp_path: Path, redis_url: str) -> None:
    dsn = fresh_database
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
        conn.execute("INSERT INTO warehouses VALUES ('fr', 1, 'Lyon')")
        conn.execute("INSERT INTO customers VALUES (1, 'Ada'), (2, 'Grace')")
        conn.execute("INSERT INTO products VALUES (5, 'lamp', 'fr', 1)")
        conn.execute("INSERT INTO orders VALUES (10, 1, 'new')")
        conn.execute("INSERT INTO order_items VALUES (100, 10, 5, 0)")
    path = tmp_path / "pipeline.yaml"
    target = f"{unique_name}_orders"
    write_config(path, dsn, unique_name, redis_url, JOINS.format(target=target))
    log = tmp_path / "cdc-run.log"
    proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c", str(path)],
                            stdout=subprocess.DEVNULL, stderr=log.open("ab"))
    cache = redis.Redis.from_url(redis_url)
    key = f"{target}:10"
    try:
        first = _wait_for(cache, key, lambda record: record.get("items"), proc, log)
        assert first["customer"] == {"id": 1, "name": "Ada"}
        assert first["items"][0]["product"]["warehouse"]["city"] == "Lyon"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("UPDATE warehouses SET city = 'Lille'")
            conn.execute("UPDATE orders SET customer_id = 2")
        moved = _wait_for(cache, key, lambda record: record["customer"]["name"] == "Grace"
                          and record["items"][0]["product"]["warehouse"]["city"] == "Lille",
                          proc, log)
        assert moved["customer"] == {"id": 2, "name": "Grace"}
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _wait_for(cache: redis.Redis, key: str, ready: Callable[[Any], Any],
              proc: subprocess.Popen[bytes], log: Path) -> Any:
    deadline = time.monotonic() + 90
    while True:
        value = cast(bytes | None, cache.get(key))
        record = json.loads(value) if value is not None else None
        if record is not None and ready(record):
            return record
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"{key}: {record}; {log.read_text()[-2000:]}"
        time.sleep(0.2)
