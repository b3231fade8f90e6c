"""``cdc replay aggregates`` against PostgreSQL, through the real capture: after a
randomized orders workload (inserts, updates, deletes), each aggregate declared in
``spark.aggregates`` equals the same query run in PostgreSQL — values compared exactly
(decimals as ``Decimal``) and by checksum — and a broken query fails naming itself."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from click.testing import CliRunner
from psycopg.rows import dict_row

from cdc.capture.runner import Capture
from cdc.cli import main
from spark_pipelines.checksum import python_checksum
from tests.integration.capture.conftest import CaptureEnv, capture_env, run_capture
from tests.integration.spark.test_replay_materialize import current_lsn, replay, wait_captured

pytestmark = pytest.mark.integration
__all__ = ["capture_env", "run_capture"]

PER_DAY = ("SELECT customer_id, date_trunc('day', created_at) AS day, count(*) AS orders, "
           "sum(amount) AS total FROM {orders} GROUP BY 1, 2")
PER_CUSTOMER = ("SELECT c.id AS customer_id, c.name, count(o.id) AS orders, "
                "coalesce(sum(o.amount), 0.00) AS total "
                "FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.id, c.name")
AGGREGATES = [{"name": "orders_per_customer_day", "sql": PER_DAY.format(orders="`public.orders`")},
              {"name": "orders_per_customer", "sql": PER_CUSTOMER},
              {"name": "broken", "sql": "SELECT no_such_column FROM orders"}]
START = datetime(2026, 11, 20, 22, 0, tzinfo=UTC)


def orders_workload(env: CaptureEnv, rng: random.Random, transactions: int) -> None:
    """Random transactions of order inserts, updates (amount, customer, time) and deletes."""
    next_id = 1
    with psycopg.connect(env.dsn) as conn:
        for _ in range(transactions):
            with conn.transaction():
                ids = [r[0] for r in conn.execute("SELECT id FROM orders").fetchall()]
                for _ in range(rng.randint(1, 6)):
                    choice = rng.random()
                    if choice < 0.6 or not ids:
                        conn.execute("INSERT INTO orders (id, customer_id, amount, created_at) "
                                     "VALUES (%s, %s, %s, %s)",
                                     (next_id, rng.randint(1, 6), Decimal(rng.randint(1, 99999))
                                      / 100, START + timedelta(minutes=rng.randint(0, 4000))))
                        ids.append(next_id)
                        next_id += 1
                    elif choice < 0.85:
                        conn.execute("UPDATE orders SET amount = amount + %s, customer_id = %s, "
                                     "created_at = created_at + %s WHERE id = %s",
                                     (Decimal("0.05"), rng.randint(1, 6),
                                      timedelta(hours=rng.randint(-12, 12)), rng.choice(ids)))
                    else:
                        target = rng.choice(ids)
                        conn.execute("DELETE FROM orders WHERE id = %s", (target,))
                        ids.remove(target)


def postgresql(env: CaptureEnv, query: str, time_zone: str) -> list[dict[str, Any]]:
    with psycopg.connect(env.dsn, row_factory=dict_row) as conn:
        conn.execute("SELECT set_config('TimeZone', %s, false)", (time_zone,))
        return list(conn.execute(query.encode()))


def test_aggregates_equal_the_same_query_in_postgresql(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture], spark: Any,
        tmp_path: Path) -> None:
    env = capture_env
    env.config_path.write_text(env.config_path.read_text()
                               + yaml.safe_dump({"spark": {"aggregates": AGGREGATES}}))
    env.sql("CREATE TABLE customers (id bigint PRIMARY KEY, name text)",
            "CREATE TABLE orders (id bigint PRIMARY KEY, customer_id bigint, "
            "amount numeric(12,2), created_at timestamptz)")
    run_capture()
    env.sql("INSERT INTO customers SELECT i, 'customer ' || i FROM generate_series(1, 7) i")
    orders_workload(env, random.Random(20261123), 25)
    env.sql("UPDATE customers SET name = name || ' ü' WHERE id = 3")
    wait_captured(env, current_lsn(env))

    out = tmp_path / "out"
    found = replay("aggregates", "-c", str(env.config_path), "--output", str(out),
                   "--aggregate", "orders_per_customer_day", "--aggregate", "orders_per_customer")
    assert set(found) == {"public.customers", "public.orders", "orders_per_customer_day",
                          "orders_per_customer"}
    time_zone = spark.conf.get("spark.sql.session.timeZone")

    per_day = postgresql(env, PER_DAY.format(orders="orders"), time_zone)
    assert len(per_day) > 5
    assert found["orders_per_customer_day"] == python_checksum(per_day)
    written = spark.read.parquet(str(out / "aggregates" / "orders_per_customer_day"))
    assert dict(written.dtypes)["total"].startswith("decimal(")
    got = {(r["customer_id"], r["day"]): (r["orders"], r["total"]) for r in written.selectExpr(
        "customer_id", "unix_micros(day) AS day", "orders", "total").collect()}
    want = {(r["customer_id"], (r["day"] - datetime(1970, 1, 1, tzinfo=UTC))
             // timedelta(microseconds=1)): (r["orders"], r["total"]) for r in per_day}
    assert got == want
    assert all(isinstance(total, Decimal) for _, total in got.values())

    per_customer = postgresql(env, PER_CUSTOMER, time_zone)
    assert found["orders_per_customer"] == python_checksum(per_customer)
    assert {r["customer_id"]: (r["name"], r["orders"], r["total"]) for r in spark.read.parquet(
        str(out / "aggregates" / "orders_per_customer")).collect()} == {
        r["customer_id"]: (r["name"], r["orders"], r["total"]) for r in per_customer}

    failed = CliRunner().invoke(main, ["replay", "aggregates", "-c", str(env.config_path),
                                       "--output", str(out), "--aggregate", "broken",
                                       "--no-progress"])
    assert failed.exit_code == 1
    assert "'broken' failed in Spark" in failed.output
    assert "no_such_column" in failed.output and "UNRESOLVED_COLUMN" in failed.output
    assert "Traceback" not in failed.output
