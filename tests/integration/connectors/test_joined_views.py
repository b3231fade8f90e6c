"""Joined views end to end: ``cdc run`` keeps order documents (customer, items, products)
exact in real OpenSearch and Redis through a random shop workload with updates, deletes,
key changes, truncates, TOAST-unchanged columns and a kill -9 of ``cdc run`` mid-way.

The expectation is computed from PostgreSQL's final rows with ``derived.build_record``,
and ``cdc reconcile`` compares the documents with PostgreSQL's own join (SQL, one
snapshot).
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from opensearchpy import OpenSearch

from derived import JoinedView, RowsInMemory, build_record, encode_key
from tests.processes import stop_or_fail

JOIN = {
    "source": "public.orders", "target": "orders", "exclude": ["secret"],
    "computed": {"label": "concat(status, ' #', id)"},
    "lookups": [{"name": "customer", "source": "public.customers",
                 "on": {"customer_id": "id"}, "fields": ["name", "email"]}],
    "nested": [{"name": "items", "source": "public.order_items", "on": {"id": "order_id"},
                "order_by": ["line"], "filter": "qty > 0", "exclude": ["order_id"],
                "lookups": [{"name": "product", "source": "public.products",
                             "on": {"product_id": "id"}, "fields": ["title", "price"]}]}],
}

SCHEMA = """
CREATE TABLE customers (id int PRIMARY KEY, name text, email text);
CREATE TABLE products (id int PRIMARY KEY, title text, price numeric(10,2));
CREATE TABLE orders (id int PRIMARY KEY, customer_id int, status text, note text,
                     secret text);
CREATE TABLE order_items (id int PRIMARY KEY, order_id int, product_id int, line int,
                          qty int);
ALTER TABLE orders ALTER COLUMN note SET STORAGE EXTERNAL;
"""

TABLES = ("customers", "products", "orders", "order_items")


def write_config(path: Path, dsn: str, name: str, opensearch_url: str, redis_url: str,
                 kafka: str | None = None) -> None:
    """The pipeline file: a file log, or a Kafka one at ``kafka``."""
    topics = ", ".join(f"{name}.public.{table}" for table in TABLES)
    join = json.dumps({**JOIN, "target": f"{name}_orders"})
    log = (f"  backend: kafka\n  bootstrap_servers: [{kafka}]" if kafka
           else f"  backend: file\n  path: {path.parent / 'log'}")
    path.write_text(f"""
source:
  dsn: {dsn}
  slot: {name}
  publication: {name}
  tables: [{", ".join(f"public.{table}" for table in TABLES)}]
log:
{log}
connectors:
  - name: search
    type: opensearch
    topics: [{topics}]
    batch_timeout: 100ms
    config:
      hosts: [{opensearch_url}]
      join_state_dir: {path.parent / 'state'}
      joins: [{join}]
  - name: cache
    type: redis
    topics: [{topics}]
    batch_timeout: 100ms
    config:
      url: {redis_url}
      join_state_dir: {path.parent / 'state'}
      joins: [{json.dumps({**JOIN, "target": f"{name}_orders",
                           "key_template": f"{name}:order:{{key}}"})}]
""")


class Workload:
    """Random changes to the shop's four tables."""

    def __init__(self, dsn: str, seed: int) -> None:
        self.dsn = dsn
        self.random = random.Random(seed)
        self.next_id = 1000

    def run(self, steps: int) -> None:
        pick = self.random
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for _ in range(steps):
                roll = pick.random()
                with conn.transaction():
                    if roll < 0.15:
                        self._insert_order(conn)
                    elif roll < 0.3:
                        conn.execute("INSERT INTO order_items VALUES (%s, %s, %s, %s, %s)",
                                     (self._id(), pick.randint(1, 60), pick.randint(1, 25),
                                      pick.randint(0, 9), pick.randint(-1, 4)))
                    elif roll < 0.4:
                        conn.execute("UPDATE customers SET name = %s WHERE id = %s",
                                     (f"renamed {pick.randint(0, 999)}", pick.randint(1, 30)))
                    elif roll < 0.48:
                        conn.execute("UPDATE products SET title = %s, price = price + 1 "
                                     "WHERE id = %s", (f"t{pick.randint(0, 99)}",
                                                      pick.randint(1, 25)))
                    elif roll < 0.58:  # an item moves to another order
                        conn.execute("UPDATE order_items SET order_id = %s WHERE id = "
                                     "(SELECT id FROM order_items ORDER BY random() LIMIT 1)",
                                     (pick.randint(1, 60),))
                    elif roll < 0.66:  # TOAST column left out of the update
                        conn.execute("UPDATE orders SET status = %s WHERE id = %s",
                                     (pick.choice(["new", "paid", "sent"]), pick.randint(1, 60)))
                    elif roll < 0.72:  # key changes
                        conn.execute("UPDATE order_items SET id = id + 100000 WHERE id = "
                                     "(SELECT id FROM order_items WHERE id < 100000 "
                                     "ORDER BY random() LIMIT 1)")
                    elif roll < 0.76:  # a key change leaves the TOAST column (note) out
                        conn.execute("UPDATE orders SET id = %s WHERE id = %s",
                                     (self._id(), pick.randint(1, 60)))
                    elif roll < 0.84:
                        table = pick.choice(["order_items", "customers", "orders"])
                        conn.execute(psycopg.sql.SQL("DELETE FROM {} WHERE id = %s").format(
                            psycopg.sql.Identifier(table)), (pick.randint(1, 60),))
                    elif roll < 0.86:
                        conn.execute("TRUNCATE order_items")
                    elif roll < 0.87:
                        conn.execute("TRUNCATE customers")
                        self.customers(conn)
                    else:
                        conn.execute("UPDATE orders SET customer_id = %s WHERE id = %s",
                                     (pick.choice([None, *range(1, 35)]), pick.randint(1, 60)))

    def seed(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            self.customers(conn)
            conn.execute("INSERT INTO products SELECT g, 'product ' || g, g * 1.5 "
                         "FROM generate_series(1, 25) g")
            for order in range(1, 61):
                self._insert_order(conn, order)

    def customers(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("INSERT INTO customers SELECT g, 'customer ' || g, 'c' || g || '@x' "
                     "FROM generate_series(1, 30) g ON CONFLICT DO NOTHING")

    def _insert_order(self, conn: psycopg.Connection[Any], order: int | None = None) -> None:
        pick = self.random
        order = order or pick.randint(1, 60)
        conn.execute("INSERT INTO orders VALUES (%s, %s, 'new', %s, 'hidden') "
                     "ON CONFLICT (id) DO UPDATE SET note = excluded.note",
                     (order, pick.randint(1, 32), "n" * 9000 + str(pick.random())))
        for line in range(pick.randint(0, 3)):
            conn.execute("INSERT INTO order_items VALUES (%s, %s, %s, %s, %s)",
                         (self._id(), order, pick.randint(1, 25), line, pick.randint(0, 3)))

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id


def expected_documents(dsn: str, view: JoinedView) -> dict[str, dict[str, Any]]:
    """The joined documents of PostgreSQL's current rows, by ``build_record``."""
    tables = {}
    with psycopg.connect(dsn) as conn:
        for table in TABLES:
            cursor = conn.execute(psycopg.sql.SQL("SELECT * FROM {}").format(
                psycopg.sql.Identifier(table)))
            names = [column.name for column in cursor.description or ()]
            rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            for row in rows:
                if "price" in row and row["price"] is not None:
                    row["price"] = str(row["price"])
            tables["public", table] = [({"id": row["id"]}, row) for row in rows]
    rows_in_memory = RowsInMemory(tables)
    documents = {}
    for key, row in tables["public", "orders"]:
        record = build_record(view, row, rows_in_memory)
        if record is not None:
            documents[encode_key(key)] = record
    return documents


def search_documents(client: OpenSearch, index: str) -> dict[str, dict[str, Any]]:
    if not client.indices.exists(index=index):
        return {}
    client.indices.refresh(index=index)
    hits = client.search(index=index, body={"query": {"match_all": {}}, "size": 10_000})
    return {hit["_id"]: hit["_source"] for hit in hits["hits"]["hits"]}


def cache_documents(client: redis.Redis, name: str) -> dict[str, dict[str, Any]]:
    found = {}
    for key in client.scan_iter(match=f"{name}:order:*"):
        value: Any = client.get(key)
        if value is not None:
            found[key.decode().rsplit(":", 1)[1]] = json.loads(value)
    return found


# the joined objects' fields mapped by their columns' types (numeric: keyword + double)
JOINED_FIELD_TYPES = {"customer.name": "text", "customer.email": "text", "items.qty": "long",
                      "items.line": "long", "items.product.title": "text",
                      "items.product.price": "keyword", "items.product.price.double": "double"}


def joined_field_types(client: OpenSearch, index: str) -> dict[str, str]:
    """The mapped types of ``JOINED_FIELD_TYPES``' fields in the index behind ``index``."""
    mappings = next(iter(client.indices.get_mapping(index=index).values()))["mappings"]
    found = {}
    for path in JOINED_FIELD_TYPES:
        node: dict[str, Any] = mappings
        for part in path.split("."):
            node = node.get("properties", node.get("fields", {})).get(part, {})
        found[path] = str(node.get("type"))
    return found


def start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c", str(config)],
                            stdout=subprocess.DEVNULL, stderr=log.open("ab"))


def wait_streaming(dsn: str, name: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        with psycopg.connect(dsn) as conn:
            if conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s "
                            "AND active", (name,)).fetchone():
                return
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "cdc run did not start streaming"
        time.sleep(0.2)


@dataclass(frozen=True)
class Converged:
    """What ``converged_after_a_kill`` gives while ``cdc run`` still runs."""

    config: Path
    search: OpenSearch
    index: str
    want: dict[str, dict[str, Any]]


@contextlib.contextmanager
def converged_after_a_kill(dsn: str, name: str, tmp_path: Path, opensearch_url: str,
                           redis_url: str, seed: int, kafka: str | None) -> Iterator[Converged]:
    """``cdc run`` through a random workload with a kill -9 mid-way, until OpenSearch and
    Redis hold the documents PostgreSQL's final rows give, checked by ``cdc reconcile``
    too; then the caller's block runs before ``cdc run`` is stopped."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
    config = tmp_path / "pipeline.yaml"
    write_config(config, dsn, name, opensearch_url, redis_url, kafka)
    workload = Workload(dsn, seed=seed)
    workload.seed()
    stderr = tmp_path / "cdc-run.log"
    proc = start(config, stderr)
    cache = redis.Redis.from_url(redis_url)
    search = OpenSearch([opensearch_url])
    index = f"{name}_orders"
    view = JoinedView.model_validate({**JOIN, "target": index})
    try:
        wait_streaming(dsn, name, proc, stderr)
        workload.run(150)
        time.sleep(1.0)  # mid-way: some batches applied, some not
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        workload.run(100)
        proc = start(config, stderr)
        wait_streaming(dsn, name, proc, stderr)
        workload.run(150)
        want = expected_documents(dsn, view)
        assert len(want) > 20
        deadline = time.monotonic() + 120
        while True:
            got_search = search_documents(search, index)
            got_cache = cache_documents(cache, name)
            if got_search == want and got_cache == want:
                break
            assert proc.poll() is None, stderr.read_text()[-3000:]
            if time.monotonic() > deadline:
                wrong = sorted(k for k in want.keys() | got_search.keys()
                               if want.get(k) != got_search.get(k))[:3]
                notes = [line for line in stderr.read_text().splitlines()
                         if "joins" in line or "ERROR" in line][-20:]
                raise AssertionError(
                    f"not converged: search {len(got_search)}/{len(want)}, cache "
                    f"{len(got_cache)}/{len(want)}; log: {notes}; first differences: "
                    + "; ".join(f"{k}: want {str(want.get(k))[-300:]} got "
                                f"{str(got_search.get(k))[-300:]}" for k in wrong))
            time.sleep(0.5)
        assert joined_field_types(search, index) == JOINED_FIELD_TYPES
        # the oracle: PostgreSQL's own join of one snapshot, through cdc reconcile
        checked = subprocess.run([sys.executable, "-m", "cdc.cli", "reconcile", "-c",
                                  str(config)], capture_output=True, text=True, timeout=300)
        summary = [line for line in checked.stdout.splitlines()
                   if line.startswith("reconcile:")]
        assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
        assert summary and summary[-1].endswith("missing=0 extra=0 different=0"), summary
        assert f"tables=2 rows={2 * len(want)}" in summary[-1], summary
        yield Converged(config, search, index, want)
    finally:
        code = stop_or_fail(proc)
        cache.close()
    assert code == 0, stderr.read_text()[-3000:]


# seed 11 runs in tests/integration/spark/test_rebuild_joins.py, with the Spark rebuild
@pytest.mark.parametrize(("seed", "backend"), [(29, "file"), (43, "kafka")])
def test_joined_documents_stay_exact_through_a_random_workload_and_a_kill(
        fresh_database: str, unique_name: str, tmp_path: Path, opensearch_url: str,
        redis_url: str, seed: int, backend: str, request: pytest.FixtureRequest) -> None:
    kafka = request.getfixturevalue("kafka_bootstrap") if backend == "kafka" else None
    with converged_after_a_kill(fresh_database, unique_name, tmp_path, opensearch_url,
                                redis_url, seed, kafka) as converged:
        assert converged.want
