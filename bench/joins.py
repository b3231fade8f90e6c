"""Joined views through ``cdc run`` against plain ``helpers.bulk`` of the same documents
(``make bench-joins``).

A shop is loaded into PostgreSQL first: 100,000 customers, 10,000 products, 1,000,000
orders and 3,000,000 order items (3 an order, ``line`` 0-2); ``BENCH_JOINS_SCALE``
(default 1) scales every count. The first ``BENCH_JOINS_FANOUT`` orders (default 10,000
x the scale) belong to customer 1, who has no other order. The joined view: one document
an order, with its ``customer`` (name, email) and its ``items`` ordered by ``line``,
each with its ``product`` (title). Only int and text columns: the SQL reference's JSON
is then the connector's document exactly.

1. ``cdc run`` (the capture's initial snapshot, then the OpenSearch connector with the
   join) is started on the loaded tables and timed until its connector has committed
   every topic to its end (each topic holding its table's rows): every document is then
   acknowledged by OpenSearch; the index's ``_count`` and a sample of documents are
   checked against the SQL join. The connector's ``batch_timeout`` is 50 ms, as in
   ``bench.sinks``.
2. Reference, same run: the same documents built by one SQL query (``json_build_object``
   / ``json_agg``) read through a server-side cursor and written by ``helpers.bulk`` to a
   fresh index with the connector's settings and mapping; SQL and bulk timed together.
   ``joins_ratio_vs_bulk`` = joined documents/s ÷ reference documents/s (target ≥ 0.5).
3. Fanout, ``cdc run`` still running and caught up: customer 1 renamed in one
   transaction, timed from its commit until the connector committed it (every document
   rewritten and acknowledged), then checked (``_count`` of the new name); reference:
   ``helpers.bulk`` of those documents, already built, over the reference index's.
   ``BENCH_JOINS_FANOUT_ROUNDS`` rounds (default 3), the two sides interleaved, each
   begun once OpenSearch is quiet (its merges after the loads would otherwise land on
   whichever side runs first: at most 120 s waited, the wait printed); each round's
   ratio is printed, and ``joins_fanout_ratio_vs_bulk`` is their median (reference time
   ÷ connector time, target ≥ 0.8), ``joins_fanout_s``/``_bulk_s`` the medians of each
   side.
4. ``joins_peak_rss_mb``: the peak of the summed RSS of ``cdc run`` and its children
   (sampled every 0.25 s); ``joins_state_mb``: the join state directory on disk at the end.

``*_cpu_s`` lines give the CPU seconds of each process (``cdc run``'s children, the
PostgreSQL and OpenSearch servers) during the load: where the time went.
Servers come from ``compose.launcher`` (free ports), and are stopped at the end, also on
failure. Prints ``name=value`` lines, the headline last.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from opensearchpy import OpenSearch, helpers
from psycopg import sql

from bench.procs import Sampler, cpu_seconds, role_names, server_pid
from bench.sinks import index_body
from cdc.log.file import FileLog
from compose.launcher import services

SCALE = float(os.environ.get("BENCH_JOINS_SCALE", "1"))
CUSTOMERS = max(100, int(100_000 * SCALE))
PRODUCTS = max(100, int(10_000 * SCALE))
ORDERS = max(1_000, int(1_000_000 * SCALE))
ITEMS_PER_ORDER = 3
FANOUT = min(ORDERS // 2, int(os.environ.get("BENCH_JOINS_FANOUT", max(100, int(10_000 * SCALE)))))
BULK = 500  # the sink's default bulk_size: the reference's chunk_size too
SAMPLE = 500
TABLES = ("customers", "products", "orders", "order_items")
PAGE = 1000
FANOUT_ROUNDS = max(1, int(os.environ.get("BENCH_JOINS_FANOUT_ROUNDS", "3")))
QUIET_CPU = 0.1  # OpenSearch is quiet below a tenth of a core over half a second
QUIET_WAIT_S = 120.0

JOIN = {
    "source": "public.orders", "target": "orders",
    "lookups": [{"name": "customer", "source": "public.customers",
                 "on": {"customer_id": "id"}, "fields": ["name", "email"]}],
    "nested": [{"name": "items", "source": "public.order_items", "on": {"id": "order_id"},
                "order_by": ["line"], "exclude": ["order_id"],
                "lookups": [{"name": "product", "source": "public.products",
                             "on": {"product_id": "id"}, "fields": ["title"]}]}],
}

SCHEMA = """
CREATE TABLE customers (id int PRIMARY KEY, name text, email text);
CREATE TABLE products (id int PRIMARY KEY, title text, stock int);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int, status text, amount_cents int);
CREATE TABLE order_items (id int PRIMARY KEY, order_id int, product_id int, line int,
                          qty int);
"""

# The joined view's documents by SQL: the reference's source, and the checks' oracle.
DOCUMENTS_SQL = """
SELECT o.id, json_build_object(
    'id', o.id, 'customer_id', o.customer_id, 'status', o.status,
    'amount_cents', o.amount_cents,
    'customer', CASE WHEN c.id IS NULL THEN NULL
                ELSE json_build_object('name', c.name, 'email', c.email) END,
    'items', coalesce(it.items, '[]'::json))::text
FROM orders o
LEFT JOIN customers c ON c.id = o.customer_id
LEFT JOIN (
    SELECT i.order_id, json_agg(json_build_object(
        'id', i.id, 'product_id', i.product_id, 'line', i.line, 'qty', i.qty,
        'product', CASE WHEN p.id IS NULL THEN NULL
                   ELSE json_build_object('title', p.title) END) ORDER BY i.line, i.id) AS items
    FROM order_items i LEFT JOIN products p ON p.id = i.product_id
    {item_filter}
    GROUP BY i.order_id) it ON it.order_id = o.id
{order_filter}
"""


def documents_sql(ids: str | None = None) -> sql.SQL:
    """``DOCUMENTS_SQL``, for every order or for those ``ids`` (a SQL condition on the
    order id, with ``{}`` for the column: it appears twice) only."""
    if ids is None:
        return sql.SQL(DOCUMENTS_SQL.format(item_filter="", order_filter=""))
    return sql.SQL(DOCUMENTS_SQL.format(item_filter="WHERE " + ids.format("i.order_id"),
                                        order_filter="WHERE " + ids.format("o.id")))


def load(dsn: str) -> None:
    """The shop's tables and rows."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
        conn.execute("INSERT INTO customers SELECT g, 'customer ' || g, 'c' || g || "
                     "'@example.com' FROM generate_series(1, %s) g", (CUSTOMERS,))
        conn.execute("INSERT INTO products SELECT g, 'product ' || g, g %% 100 "
                     "FROM generate_series(1, %s) g", (PRODUCTS,))
        # orders 1..FANOUT: customer 1's; the others: customers 2..CUSTOMERS
        conn.execute("INSERT INTO orders SELECT g, CASE WHEN g <= %s THEN 1 "
                     "ELSE 2 + g %% (%s - 1) END, (ARRAY['new', 'paid', 'sent'])[g %% 3 + 1], "
                     "g %% 100000 FROM generate_series(1, %s) g", (FANOUT, CUSTOMERS, ORDERS))
        conn.execute("INSERT INTO order_items SELECT g, (g - 1) / %s + 1, "
                     "1 + (g::bigint * 7919) %% %s, (g - 1) %% %s, 1 + g %% 4 "
                     "FROM generate_series(1, %s) g",
                     (ITEMS_PER_ORDER, PRODUCTS, ITEMS_PER_ORDER, ORDERS * ITEMS_PER_ORDER))
        conn.execute("VACUUM ANALYZE")


def write_config(path: Path, dsn: str, name: str, opensearch_url: str) -> None:
    topics = ", ".join(f"{name}.public.{table}" for table in TABLES)
    join = json.dumps({**JOIN, "target": f"{name}_orders"})
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
  - name: search
    type: opensearch
    topics: [{topics}]
    batch_timeout: 50ms
    config:
      hosts: [{opensearch_url}]
      join_state_dir: {path.parent / 'state'}
      joins: [{join}]
""")


@contextlib.contextmanager
def database(admin_dsn: str, name: str) -> Iterator[str]:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = admin_dsn.rsplit("/", 1)[0] + f"/{name}"
    try:
        yield dsn
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                         " WHERE slot_name = %s AND NOT active", (name,))
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                         .format(sql.Identifier(name)))


# --- the connector's side ----------------------------------------------------------

def wait_committed(log_path: Path, name: str, process: subprocess.Popen[bytes],
                   least: dict[str, int], stderr: Path, timeout: float) -> None:
    """Until group ``search`` committed every topic to its end, each topic holding at
    least ``least[table]`` messages, and its joined view has no record left to write
    (records are deferred while it catches up)."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError("cdc run stopped: " + stderr.read_text()[-3000:])
        if (_committed(FileLog(log_path).admin(), name, least)
                and _nothing_pending(log_path.parent / "state" / "search.sqlite")):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"cdc run did not catch up in {timeout:.0f} s")
        time.sleep(0.05)


def _committed(admin: Any, name: str, least: dict[str, int]) -> bool:
    for table in TABLES:
        topic = f"{name}.public.{table}"
        try:
            ends = {p.partition: p.end_offset for p in admin.partitions(topic)}
        except Exception:  # the topic is not there yet
            return False
        if sum(ends.values()) < least.get(table, 0):
            return False
        committed = {lag.partition: lag.committed or 0 for lag in admin.group_lag("search")
                     if lag.topic == topic}
        if any(committed.get(p, 0) < end for p, end in ends.items()):
            return False
    return True


def _nothing_pending(store: Path) -> bool:
    """True when the connector's state store has no record waiting to be written (none
    marked, and no initial load under way: its records are marked when it ends)."""
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            pending = int(db.execute("SELECT count(*) FROM pending").fetchone()[0])
            loading = db.execute("SELECT 1 FROM meta WHERE name LIKE 'loading:%'").fetchone()
            return pending == 0 and loading is None
    except sqlite3.Error:  # not created yet
        return False


def end_offsets(log_path: Path, name: str) -> dict[str, int]:
    admin = FileLog(log_path).admin()
    return {table: sum(p.end_offset for p in admin.partitions(f"{name}.public.{table}"))
            for table in TABLES}


def check_sample(conn: psycopg.Connection[Any], search: OpenSearch, index: str,
                 ids: list[int]) -> None:
    """The documents of orders ``ids`` in ``index`` are the SQL join's."""
    want = {str(key): json.loads(text) for key, text in conn.execute(
        documents_sql("{} = ANY(%s)"), (ids, ids))}
    found = search.mget(index=index, body={"ids": [str(i) for i in ids]})
    got = {doc["_id"]: doc.get("_source") for doc in found["docs"]}
    wrong = [key for key in want if want[key] != got.get(key)]
    if wrong:
        key = wrong[0]
        raise AssertionError(f"{len(wrong)}/{len(want)} documents differ; {key}: want "
                             f"{want[key]} got {got.get(key)}")


def count(search: OpenSearch, index: str, query: dict[str, Any] | None = None) -> int:
    search.indices.refresh(index=index)
    body = {"query": query} if query else None
    return int(search.count(index=index, body=body)["count"])


# --- the reference -----------------------------------------------------------------

def reference_load(dsn: str, search: OpenSearch, index: str) -> float:
    """Seconds to read the documents by SQL (a server-side cursor) and ``helpers.bulk``
    them into ``index``."""
    started = time.perf_counter()
    with psycopg.connect(dsn) as conn, conn.cursor(name="documents") as cursor:
        cursor.itersize = 5000
        cursor.execute(documents_sql())
        actions = ({"_index": index, "_id": str(key), "_source": text}
                   for key, text in cursor)
        ok, errors = helpers.bulk(search, actions, chunk_size=BULK, raise_on_error=False)
    assert not errors and ok == ORDERS, (ok, errors[:3] if errors else None)
    return time.perf_counter() - started


def warm_up(search: OpenSearch, dsn: str) -> None:
    """Throwaway indexes of some documents first, so the measured runs do not pay the
    JVM's JIT compilation of their bulk paths (bench.sinks): plain, as the reference
    writes, and through an alias with external versions, as the connector writes (its
    first thousands of such writes otherwise cost OpenSearch twice the CPU)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(documents_sql("{} <= %s"),
                            (min(ORDERS, 20_000),) * 2).fetchall()
    for _ in range(2):
        helpers.bulk(search, ({"_index": "warmup", "_id": str(k), "_source": t}
                              for k, t in rows), chunk_size=BULK)
    search.indices.create(index="warmup-versioned", body={"aliases": {"warmup-alias": {}}})
    for version in range(1, 3):
        for start in range(0, len(rows), BULK):
            body = b"".join(
                b'{"index":{"_index":"warmup-alias","_id":"%d","version":%d,'
                b'"version_type":"external_gte","require_alias":true}}\n%s\n'
                % (key, version, text.encode()) for key, text in rows[start:start + BULK])
            assert not search.bulk(body=body, filter_path="errors").get("errors")
    search.indices.delete(index="warmup,warmup-versioned")


# --- main --------------------------------------------------------------------------

def main() -> None:
    name = f"bench_joins_{uuid.uuid4().hex[:8]}"
    started_all = time.monotonic()
    with contextlib.ExitStack() as stack:
        admin_dsn = stack.enter_context(services.postgres_dsn())
        opensearch_url = stack.enter_context(services.opensearch_url())
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-joins-")))
        dsn = stack.enter_context(database(admin_dsn, name))
        search = OpenSearch([opensearch_url], timeout=300)
        stack.callback(search.close)
        stack.callback(_cleanup, search, name)

        loaded = time.monotonic()
        load(dsn)
        print(f"joins_scale={SCALE:g}")
        print(f"joins_orders={ORDERS}")
        print(f"joins_items={ORDERS * ITEMS_PER_ORDER}")
        print(f"joins_customers={CUSTOMERS}")
        print(f"joins_products={PRODUCTS}")
        print(f"joins_pg_load_s={time.monotonic() - loaded:.1f}", flush=True)
        warm_up(search, dsn)

        config = workdir / "pipeline.yaml"
        write_config(config, dsn, name, opensearch_url)
        stderr_path = workdir / "cdc-run.log"
        stderr = stderr_path.open("wb")
        stack.callback(stderr.close)
        pg_pid = server_pid(int(admin_dsn.rsplit(":", 1)[1].split("/", 1)[0]))
        os_pid = server_pid(int(opensearch_url.rsplit(":", 1)[1].rstrip("/")))
        pg_cpu0 = cpu_seconds(pg_pid) if pg_pid else 0.0
        os_cpu0 = cpu_seconds(os_pid) if os_pid else 0.0

        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c", str(config)],
                                   stdout=subprocess.DEVNULL, stderr=stderr)
        stack.callback(_stop, process)
        sampler = Sampler(process.pid)
        sampler.start()
        stack.callback(sampler.stop)
        least = {"customers": CUSTOMERS, "products": PRODUCTS, "orders": ORDERS,
                 "order_items": ORDERS * ITEMS_PER_ORDER}
        wait_committed(workdir / "log", name, process, least, stderr_path,
                       timeout=max(600.0, 3600 * SCALE))
        joined_s = time.perf_counter() - started
        sampler.sample()
        load_peak_mb = sampler.peak_mb
        load_cpu = {pid: cpu for pid, cpu in sampler.cpu.items()}
        pg_cpu = (cpu_seconds(pg_pid) - pg_cpu0) if pg_pid else 0.0
        os_cpu = (cpu_seconds(os_pid) - os_cpu0) if os_pid else 0.0

        index = f"{name}_orders"
        documents = count(search, index)
        assert documents == ORDERS, f"{documents} documents in {index}, want {ORDERS}"
        ids = random.Random(3).sample(range(1, ORDERS + 1), min(SAMPLE, ORDERS))
        with psycopg.connect(dsn) as conn:
            check_sample(conn, search, index, [*ids, 1, FANOUT, FANOUT + 1, ORDERS])
        writes = _index_total(search, index)
        print(f"joins_load_s={joined_s:.1f}")
        print(f"joins_writes_per_doc={writes / ORDERS:.2f}")
        print(f"joins_docs_per_s={ORDERS / joined_s:.0f}", flush=True)

        # the reference: same documents by SQL + helpers.bulk into a fresh index
        reference = f"{name}_reference"
        search.indices.create(index=reference, body=index_body(search, index))
        os_cpu0 = cpu_seconds(os_pid) if os_pid else 0.0
        reference_s = reference_load(dsn, search, reference)
        bulk_os_cpu = (cpu_seconds(os_pid) - os_cpu0) if os_pid else 0.0
        assert count(search, reference) == ORDERS
        print(f"joins_bulk_s={reference_s:.1f}")
        print(f"joins_bulk_cpu_s_opensearch={bulk_os_cpu:.1f}")
        print(f"joins_bulk_docs_per_s={ORDERS / reference_s:.0f}", flush=True)

        # fanout: customer 1 (FANOUT orders) renamed, rounds of both sides interleaved
        connector_times: list[float] = []
        reference_times: list[float] = []
        for round_number in range(1, FANOUT_ROUNDS + 1):
            waited = wait_quiet(os_pid)
            fanout_s, rows = rename_fanout(dsn, search, index, workdir / "log", name,
                                           process, stderr_path)
            waited += wait_quiet(os_pid)
            fanout_reference_s = reference_fanout(search, reference, rows)
            connector_times.append(fanout_s)
            reference_times.append(fanout_reference_s)
            print(f"joins_fanout_s_round_{round_number}={fanout_s:.2f}")
            print(f"joins_fanout_bulk_s_round_{round_number}={fanout_reference_s:.2f}")
            print(f"joins_fanout_quiet_wait_s_round_{round_number}={waited:.1f}")
            print(f"joins_fanout_ratio_round_{round_number}="
                  f"{fanout_reference_s / fanout_s:.2f}", flush=True)
        sampler.sample()
        fanout_cpu = cpu_seconds(process.pid)
        sampler.stop()
        _stop(process)

        state_mb = sum(f.stat().st_size for f in (workdir / "state").rglob("*")
                       if f.is_file()) / 2**20
        names = role_names(load_cpu, process.pid)
        for pid, (_, cpu) in sorted(load_cpu.items()):
            role = names[pid]
            print(f"joins_load_cpu_s_{role}={cpu:.1f}")
            print(f"joins_peak_rss_mb_{role}={sampler.peaks.get(pid, 0.0):.0f}")
        print(f"joins_load_cpu_s_postgres={pg_cpu:.1f}")
        print(f"joins_load_cpu_s_opensearch={os_cpu:.1f}")
        print(f"joins_cdc_cpu_s_total={fanout_cpu:.1f}")
        print(f"joins_state_mb={state_mb:.0f}")
        print(f"joins_load_peak_rss_mb={load_peak_mb:.0f}")
        print(f"joins_peak_rss_mb={sampler.peak_mb:.0f}")
        print(f"joins_fanout_docs={FANOUT}")
        print(f"joins_fanout_s={statistics.median(connector_times):.2f}")
        print(f"joins_fanout_bulk_s={statistics.median(reference_times):.2f}")
        ratios = [ref / own for ref, own in zip(reference_times, connector_times, strict=True)]
        print(f"joins_fanout_ratio_vs_bulk={statistics.median(ratios):.2f}")
        print(f"joins_elapsed_s={time.monotonic() - started_all:.0f}")
        print(f"joins_ratio_vs_bulk={reference_s / joined_s:.2f}")


def rename_fanout(dsn: str, search: OpenSearch, index: str, log_path: Path, name: str,
                  process: subprocess.Popen[bytes], stderr_path: Path
                  ) -> tuple[float, list[tuple[Any, ...]]]:
    """Rename customer 1 and time it until the connector has committed the change (every
    document of the customer's orders written); checks the documents, and returns the
    time and the documents as SQL builds them."""
    new_name = f"renamed{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        ends = end_offsets(log_path, name)
        least = {**ends, "customers": ends["customers"] + 1}
        conn.execute("UPDATE customers SET name = %s WHERE id = 1", (new_name,))
        committed = time.perf_counter()
        wait_committed(log_path, name, process, least, stderr_path, timeout=600)
        fanout_s = time.perf_counter() - committed
        renamed = count(search, index, {"match": {"customer.name": new_name}})
        assert renamed == FANOUT, f"{renamed} documents renamed, want {FANOUT}"
        rows = conn.execute(documents_sql("{} <= %s"), (FANOUT, FANOUT)).fetchall()
        check_sample(conn, search, index, [1, FANOUT // 2, FANOUT])
    return fanout_s, rows


def reference_fanout(search: OpenSearch, reference: str, rows: list[tuple[Any, ...]]
                     ) -> float:
    """Seconds for ``helpers.bulk`` to write the fanout's documents, already built."""
    started = time.perf_counter()
    ok, errors = helpers.bulk(search, ({"_index": reference, "_id": str(k), "_source": t}
                                       for k, t in rows), chunk_size=BULK,
                              raise_on_error=False)
    elapsed = time.perf_counter() - started
    assert ok == FANOUT and not errors, (ok, errors[:3] if errors else None)
    return elapsed


def wait_quiet(pid: int | None) -> float:
    """Wait until process ``pid`` (OpenSearch) uses under ``QUIET_CPU`` of a core over
    half a second, at most ``QUIET_WAIT_S``; the seconds waited."""
    started = time.perf_counter()
    if not pid:
        return 0.0
    while time.perf_counter() - started < QUIET_WAIT_S:
        before = cpu_seconds(pid)
        time.sleep(0.5)
        if cpu_seconds(pid) - before < QUIET_CPU * 0.5:
            break
    return time.perf_counter() - started


def _index_total(search: OpenSearch, index: str) -> int:
    """Index operations (documents written, rewrites included) into ``index``."""
    stats = search.indices.stats(index=index, metric="indexing")
    return sum(int(shard["primaries"]["indexing"]["index_total"])
               for shard in stats["indices"].values())


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _cleanup(search: OpenSearch, name: str) -> None:
    with contextlib.suppress(Exception):
        search.indices.delete(index=f"{name}*", expand_wildcards="all",
                              ignore_unavailable=True)


if __name__ == "__main__":
    main()
