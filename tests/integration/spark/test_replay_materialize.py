"""``cdc replay materialize`` / ``state-as-of`` against PostgreSQL, through the real capture:
a randomized workload (inserts, updates, deletes, a truncate, ADD COLUMN), then the
Parquet output's rows and checksum equal ``SELECT *`` — now, and as of a recorded LSN —
on the file log and on Kafka."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg.rows import dict_row

from cdc.capture.lsn import format_lsn, parse_lsn
from cdc.capture.runner import Capture
from cdc.cli import main
from cdc.log import Record, StartAt
from cdc.log.file import FileLog
from cdc.log.kafka import KafkaLog
from spark_pipelines.checksum import hash_checksum, python_checksum, row_hash
from tests.integration.capture.conftest import CaptureEnv, capture_env, run_capture

pytestmark = pytest.mark.integration
__all__ = ["capture_env", "run_capture"]

TABLE = "public.items"


def rows_of(env: CaptureEnv) -> list[dict[str, Any]]:
    with psycopg.connect(env.dsn, row_factory=dict_row) as conn:
        return list(conn.execute("SELECT * FROM items"))


def current_lsn(env: CaptureEnv) -> int:
    with psycopg.connect(env.dsn) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return parse_lsn(row[0])


def wait_captured(env: CaptureEnv, lsn: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        with psycopg.connect(env.dsn) as conn:
            row = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                               "WHERE slot_name = %s", (env.slot,)).fetchone()
        if row and row[0] and parse_lsn(row[0]) >= lsn:
            return
        assert time.monotonic() < deadline, "the capture did not catch up"
        time.sleep(0.2)


def workload(env: CaptureEnv, rng: random.Random, transactions: int, first_id: int,
             with_note: bool) -> None:
    """Random transactions of inserts, updates and deletes."""
    next_id = first_id
    with psycopg.connect(env.dsn) as conn:
        for _ in range(transactions):
            with conn.transaction():
                ids = [r[0] for r in conn.execute("SELECT id FROM items").fetchall()]
                for _ in range(rng.randint(1, 6)):
                    choice = rng.random()
                    if choice < 0.5 or not ids:
                        conn.execute("INSERT INTO items (id, name, price, at, flag) VALUES "
                                     "(%s, %s, %s, now() - %s * interval '1 second', %s)",
                                     (next_id, f"item {next_id} ü", f"{rng.randint(0, 99999)}.0"
                                      f"{rng.randint(0, 9)}", rng.randint(0, 10**6),
                                      rng.random() < 0.5))
                        ids.append(next_id)
                        next_id += 1
                    elif choice < 0.85:
                        target = rng.choice(ids)
                        if with_note:
                            conn.execute("UPDATE items SET price = price + 1.25, note = %s "
                                         "WHERE id = %s", (f"n{rng.randint(0, 9)}", target))
                        else:
                            conn.execute("UPDATE items SET name = name || '+', flag = NOT flag "
                                         "WHERE id = %s", (target,))
                    else:
                        target = rng.choice(ids)
                        conn.execute("DELETE FROM items WHERE id = %s", (target,))
                        ids.remove(target)


def replay(*args: str) -> dict[str, tuple[int, str]]:
    """Run ``cdc replay`` in process; table → (rows, checksum) from its output."""
    result = CliRunner().invoke(main, ["replay", *args, "--no-progress"])
    assert result.exit_code == 0, (result.output, result.exception)
    found = {}
    for line in result.output.splitlines():
        if ": rows=" in line:
            name, rest = line.split(": rows=", 1)
            rows, checksum = rest.split(" checksum=")
            found[name] = (int(rows), checksum.split()[0])
    return found


def test_materialize_and_state_as_of_equal_postgresql(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture], spark: Any,
        tmp_path: Path, kafka_bootstrap: str, unique_name: str) -> None:
    env = capture_env
    env.sql("CREATE TABLE items (id bigint PRIMARY KEY, name text, price numeric(12,2), "
            "at timestamptz, flag bool)")
    run_capture()
    rng = random.Random(20261122)
    workload(env, rng, 12, 1, with_note=False)
    env.sql("TRUNCATE items")
    workload(env, rng, 10, 1000, with_note=False)
    as_of_rows = [{**row, "note": None} for row in rows_of(env)]
    as_of = current_lsn(env)
    env.sql("ALTER TABLE items ADD COLUMN note text")
    workload(env, rng, 12, 2000, with_note=True)
    wait_captured(env, current_lsn(env))
    want = python_checksum(rows_of(env))
    assert want[0] > 0

    out = tmp_path / "out"
    now = replay("materialize", "-c", str(env.config_path), "--tables", TABLE,
                 "--output", str(out))
    assert now[TABLE] == want
    parquet = spark.read.parquet(str(out / TABLE))
    assert dict(parquet.dtypes)["price"] == "decimal(12,2)"
    assert dict(parquet.dtypes)["at"] == "timestamp"
    assert {r["id"] for r in parquet.collect()} == {r["id"] for r in rows_of(env)}
    values = parquet.drop("_lsn", "_seq")
    hashed = values.withColumn("_hash", row_hash(values.schema))  # as a Delta table keeps it
    assert hash_checksum(hashed, "_hash") == want

    past = replay("state-as-of", "-c", str(env.config_path), "--tables", TABLE,
                  "--output", str(out), "--as-of", format_lsn(as_of))
    assert past[TABLE] == python_checksum(as_of_rows)
    assert (out / f"as_of_{format_lsn(as_of).replace('/', '_')}" / TABLE).is_dir()

    # the same events in a Kafka log give the same state
    prefix = unique_name
    copy_to_kafka(env, kafka_bootstrap, prefix)
    kafka_config = tmp_path / "kafka.yaml"
    kafka_config.write_text(f"source:\n  dsn: {env.dsn}\n  slot: {env.slot}\n"
                            f"  publication: {env.slot}\n"
                            f"log:\n  backend: kafka\n  bootstrap_servers: [{kafka_bootstrap}]\n"
                            f"  topic_prefix: {prefix}\n")
    on_kafka = replay("materialize", "-c", str(kafka_config), "--tables", TABLE,
                      "--output", str(tmp_path / "kafka-out"))
    assert on_kafka[TABLE] == want


def copy_to_kafka(env: CaptureEnv, bootstrap: str, prefix: str,
                  copied: dict[tuple[str, int], int] | None = None,
                  table: str = "items") -> dict[tuple[str, int], int]:
    """Every record of the table's topic and the schema topic, into Kafka topics under
    ``prefix`` (keys, values, positions and tombstones as they are); with ``copied`` (what
    an earlier call returned: records per topic and partition), only those after them."""
    before = copied or {}
    done: dict[tuple[str, int], int] = {}
    source = FileLog(env.log_dir)
    target = KafkaLog([bootstrap])
    try:
        for topic in (env.topic(table), f"{env.slot}._schemas"):
            consumer = source.consumer(f"copy-{time.monotonic_ns()}", topics=[topic],
                                       start=StartAt.earliest())
            records = []
            while batch := consumer.poll(10_000, timeout=0.5):
                for m in batch:
                    seen = done.get((topic, m.partition), 0)
                    done[(topic, m.partition)] = seen + 1
                    if seen >= before.get((topic, m.partition), 0):
                        records.append(Record(prefix + m.topic[len(env.slot):], m.key,
                                              m.value, m.position, m.tombstone,
                                              partition=m.partition))
            consumer.close()
            if records:
                target.producer().append(records)
    finally:
        source.close()
        target.close()
    return done
