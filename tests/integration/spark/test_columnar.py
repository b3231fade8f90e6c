"""Columnar companions (``cdc log columnar``) against PostgreSQL through the real capture:
the replay jobs give the same rows and checksums from the companions as from the file log's
JSON lines, or from the chunks of a Kafka log as from Kafka — after a schema change, with a
companion damaged, and after ``cdc log columnar`` was killed while writing one. One
column's name holds a dot, a space and backticks (Spark SQL quotes names in backticks)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import orjson
import psycopg
import pytest
from click.testing import CliRunner
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient
from psycopg.rows import dict_row
from pyspark.sql import SparkSession

from cdc.capture.lsn import format_lsn
from cdc.capture.runner import Capture
from cdc.cli import main
from spark_pipelines.checksum import python_checksum
from spark_pipelines.columnar import plan
from spark_pipelines.companions import (
    check_companion,
    companion_bases,
    companion_paths,
    partition_segments,
    sealed,
)
from tests.integration.capture.conftest import CaptureEnv, capture_env, run_capture
from tests.integration.spark.test_replay_materialize import (
    copy_to_kafka,
    current_lsn,
    replay,
    wait_captured,
)

pytestmark = pytest.mark.integration
__all__ = ["capture_env", "run_capture"]

TABLE = "public.orders"
T = TypeVar("T")


def small_segments(env: CaptureEnv) -> None:
    """Roll segments every 16 KiB, so the workload seals many."""
    env.config_path.write_text(env.config_path.read_text() + "  segment_bytes: 16KiB\n")


def create_orders(env: CaptureEnv) -> None:
    """The table the workload changes (``body`` TOASTed out of line, uncompressed)."""
    env.sql("CREATE TABLE orders (id bigint PRIMARY KEY, status text, amount numeric(14,2), "
            'at timestamptz, doc jsonb, tags text[], "Odd `Name`.x" text, body text)',
            "ALTER TABLE orders ALTER COLUMN body SET STORAGE EXTERNAL")


def workload(env: CaptureEnv, rng: random.Random, transactions: int, first_id: int,
             extra: bool = False) -> None:
    """Inserts, updates (some leaving the TOASTed ``body`` unchanged) and deletes, waiting
    for the capture every 5 transactions (a segment rolls between appended batches)."""
    next_id = first_id
    with psycopg.connect(env.dsn) as conn:
        for number in range(transactions):
            if number % 5 == 4:
                wait_captured(env, current_lsn(env))
            with conn.transaction():
                ids = [r[0] for r in conn.execute("SELECT id FROM orders").fetchall()]
                for _ in range(rng.randint(1, 8)):
                    choice = rng.random()
                    if choice < 0.5 or not ids:
                        conn.execute(
                            'INSERT INTO orders (id, status, amount, at, doc, tags, "Odd `Name`.x",'
                            " body) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                            (next_id, rng.choice(["new", "paid", "ü ✓"]),
                             f"{rng.randint(0, 10**9)}.{rng.randint(0, 99):02d}",
                             "infinity" if next_id % 17 == 0 else
                             f"2026-11-{1 + next_id % 28:02d} 10:00:00.{next_id % 999:03d}+00",
                             f'{{"n": {next_id}, "f": 1.5e300, "deep": {{"a": [1, 2.25]}}}}',
                             [f"t{next_id}", None], f"odd {next_id}",
                             "x" * 3000 + str(rng.random()) * 200))
                        ids.append(next_id)
                        next_id += 1
                    elif choice < 0.85:
                        target = rng.choice(ids)
                        if extra:
                            conn.execute("UPDATE orders SET status = 'shipped', extra = %s "
                                         "WHERE id = %s", (rng.randint(0, 9), target))
                        else:
                            conn.execute("UPDATE orders SET status = status || '+' "
                                         "WHERE id = %s", (target,))
                    else:
                        target = rng.choice(ids)
                        conn.execute("DELETE FROM orders WHERE id = %s", (target,))
                        ids.remove(target)


def columnar(env: CaptureEnv, *options: str, config: Path | None = None) -> str:
    """Run ``cdc log columnar`` in process (the test's Spark session); its output."""
    result = CliRunner().invoke(main, ["log", "columnar", "-c",
                                       str(config or env.config_path), *options])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def columnar_killed_at(env: CaptureEnv, crash_point: str, *options: str,
                       config: Path | None = None) -> None:
    """Run ``cdc log columnar`` in its own process, killed (SIGKILL) at ``crash_point``."""
    result = subprocess.run(
        [sys.executable, "-m", "cdc.cli", "log", "columnar", "-c",
         str(config or env.config_path), *options],
        env={**os.environ, "DISTRIBUTARY_CRASH_AT": crash_point},
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == -9, (result.returncode, result.stdout, result.stderr[-3000:])


Outputs = tuple[dict[str, Any], list[Any], list[Any]]


def outputs(spark: SparkSession, env: CaptureEnv, out: Path, as_of: str | None,
            config: Path | None = None) -> Outputs:
    """Checksums of materialize and state-as-of, and the rows each wrote (the pipeline
    file ``config``, else the capture's); ``as_of`` None: materialize only."""
    config = config or env.config_path
    now = replay("materialize", "-c", str(config), "--tables", TABLE, "--output", str(out))
    rows = sorted(map(tuple, spark.read.parquet(str(out / TABLE)).collect()), key=str)
    if as_of is None:
        return {"now": now[TABLE]}, rows, []
    past = replay("state-as-of", "-c", str(config), "--tables", TABLE,
                  "--output", str(out), "--as-of", as_of)
    as_of_dir = out / f"as_of_{as_of.replace('/', '_')}" / TABLE
    return ({"now": now[TABLE], "past": past[TABLE]}, rows,
            sorted(map(tuple, spark.read.parquet(str(as_of_dir)).collect()), key=str))


def materialized(full: Outputs) -> Outputs:
    """What ``outputs`` gives without ``as_of`` (materialize alone), from a full one."""
    return {"now": full[0]["now"]}, full[1], []


def json_only(job: Callable[[], T], env: CaptureEnv) -> T:
    """Run ``job`` with the companions set aside: the JSON lines only."""
    companions = env.log_dir / "_columnar"
    companions.rename(companions.with_name("companions-aside"))
    try:
        return job()
    finally:
        companions.with_name("companions-aside").rename(companions)


def sealed_segments(env: CaptureEnv) -> list[tuple[int, int]]:
    topic = env.topic("orders")
    return [(p, base) for p in range(3)
            for base in sealed(partition_segments(env.log_dir, topic, p))]


def test_replay_reads_the_same_from_companions_as_from_json(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture], spark: SparkSession,
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    env = capture_env
    small_segments(env)
    create_orders(env)
    run_capture()
    rng = random.Random(20261129)
    workload(env, rng, 40, 1)
    as_of = format_lsn(current_lsn(env))
    wait_captured(env, current_lsn(env))
    topic = env.topic("orders")
    assert "written=" in columnar(env)  # before the new column: its companions lack it
    early = {s for s in sealed_segments(env) if check_companion(env.log_dir, topic, *s).usable}
    assert len(early) >= 3
    env.sql("ALTER TABLE orders ADD COLUMN extra int")
    workload(env, rng, 40, 1000, extra=True)
    wait_captured(env, current_lsn(env))
    assert len(sealed_segments(env)) >= len(early) + 3, "the workload should seal more"

    from_json = json_only(lambda: outputs(spark, env, tmp_path / "json", as_of), env)
    with psycopg.connect(env.dsn, row_factory=dict_row) as conn:
        simple = list(conn.execute("SELECT id, status, amount, extra FROM orders"))
    written = spark.read.parquet(str(tmp_path / "json" / TABLE))
    assert python_checksum(r.asDict() for r in written.select(
        "id", "status", "amount", "extra").collect()) == python_checksum(simple)
    assert dict(written.dtypes)["at"] == "string"  # 'infinity' kept as text, both ways

    # killed after Spark wrote the second companion, before it was moved into place; then
    # killed between a companion's file and its manifest: neither is ever read
    columnar_killed_at(env, "columnar.parquet_written:2")
    columnar_killed_at(env, "columnar.before_manifest:1")
    usable = [s for s in sealed_segments(env) if check_companion(env.log_dir, topic, *s).usable]
    assert len(early) < len(usable) < len(sealed_segments(env))
    assert outputs(spark, env, tmp_path / "after-kill", None) == materialized(from_json)

    report = columnar(env)
    assert f"{topic}: written=" in report
    assert all(check_companion(env.log_dir, topic, *s).usable for s in sealed_segments(env))
    assert not any(p.name.startswith(".tmp-")
                   for p in (env.log_dir / "_columnar").rglob("*")), "leftovers removed"
    ends = {p: 1 << 62 for p in range(3)}
    assert len(plan(env.log_dir, topic, ends).companions) == len(sealed_segments(env))
    manifests = [check_companion(env.log_dir, topic, *s).manifest for s in early]
    assert all(m is not None and "extra" not in m.columns for m in manifests)
    assert outputs(spark, env, tmp_path / "columnar", as_of) == from_json

    # a damaged companion is passed over (and said so), then written again
    partition, base = sealed_segments(env)[0]
    parquet = companion_paths(env.log_dir, topic, partition, base)[0]
    data = bytearray(parquet.read_bytes())
    data[len(data) // 2] ^= 0xFF
    parquet.write_bytes(bytes(data))
    with caplog.at_level("WARNING"):
        assert outputs(spark, env, tmp_path / "damaged", None) == materialized(from_json)
    assert any("is damaged" in r.getMessage() for r in caplog.records)
    assert "written=1 " in columnar(env)
    assert check_companion(env.log_dir, topic, partition, base).usable

    # a segment gone (retention) takes its companion with it
    segment = env.log_dir / topic / f"partition={partition}" / f"{base:020d}.jsonl"
    segment.unlink()
    assert "removed=1 " in columnar(env)
    assert base not in companion_bases(env.log_dir, topic, partition)

    # a column equal to another but for case: Parquet's reader could take one for the
    # other, so the job reads JSON
    env.sql('ALTER TABLE orders ADD COLUMN "EXTRA" int',
            'UPDATE orders SET "EXTRA" = id WHERE id IN (SELECT id FROM orders LIMIT 5)')
    wait_captured(env, current_lsn(env))
    with_clash = json_only(lambda: outputs(spark, env, tmp_path / "clash-json", None), env)
    assert with_clash != materialized(from_json)
    assert outputs(spark, env, tmp_path / "clash", None) == with_clash
    assert "differ only in case" in columnar(env)


def test_cdc_run_keeps_the_companions_written(capture_env: CaptureEnv,
                                              tmp_path: Path) -> None:
    """``spark.columnar_every``: ``cdc run`` runs ``cdc log columnar --every`` beside the
    capture, and stops it (and its JVM) with the pipeline."""
    env = capture_env
    small_segments(env)
    env.config_path.write_text(env.config_path.read_text()
                               + "spark:\n  columnar_every: 1s\n  master: local[1]\n")
    env.sql("CREATE TABLE orders (id bigint PRIMARY KEY, status text, amount numeric(14,2), "
            'at timestamptz, doc jsonb, tags text[], "Odd `Name`.x" text, body text)')
    run = subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c", str(env.config_path)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        workload(env, random.Random(7), 30, 1)
        topic = env.topic("orders")
        deadline = time.monotonic() + 180
        while not (sealed_segments(env) and all(
                check_companion(env.log_dir, topic, *s).usable for s in sealed_segments(env))):
            assert run.poll() is None, run.stderr.read() if run.stderr else ""
            assert time.monotonic() < deadline, "cdc run wrote no companions"
            time.sleep(1)
        children = descendants(run.pid)
    finally:
        run.send_signal(signal.SIGTERM)
        _, errors = run.communicate(timeout=60)
    assert run.returncode == 0, errors[-3000:]
    assert len(sealed_segments(env)) >= 3
    assert any("java" in command for command in children.values()), children
    deadline = time.monotonic() + 30
    while (alive := [pid for pid in children if Path(f"/proc/{pid}").exists()]) \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not alive, f"outlived cdc run: {[children[pid] for pid in alive]}"


def descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid`` now: pid → command line."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                try:
                    command = (Path(f"/proc/{child}/cmdline").read_bytes()
                               .replace(b"\0", b" ").decode(errors="replace"))
                except OSError:
                    continue
                found[child] = command
                frontier.append(child)
    return found


def kafka_configs(env: CaptureEnv, tmp_path: Path, bootstrap: str,
                  prefix: str) -> tuple[Path, Path]:
    """Pipeline files for the Kafka copy of the log: without companions, and with them
    under ``tmp_path / "chunks"``."""
    text = (f"source:\n  dsn: {env.dsn}\n  slot: {env.slot}\n  publication: {env.slot}\n"
            f"log:\n  backend: kafka\n  bootstrap_servers: [{bootstrap}]\n"
            f"  topic_prefix: {prefix}\n")
    plain, chunked = tmp_path / "kafka.yaml", tmp_path / "kafka-chunks.yaml"
    plain.write_text(text)
    chunked.write_text(text + f"  columnar_path: {tmp_path / 'chunks'}\n")
    return plain, chunked


def test_replay_reads_the_same_from_kafka_chunks_as_from_kafka(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture], spark: SparkSession,
        tmp_path: Path, kafka_bootstrap: str, unique_name: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """A Kafka log's companions (chunks of offsets under ``log.columnar_path``) give the
    jobs the same rows and checksums as Kafka alone: after a schema change, a kill on the
    way, a damaged chunk, and retention removing records below and inside chunks."""
    env = capture_env
    create_orders(env)
    run_capture()
    rng = random.Random(20261130)
    workload(env, rng, 25, 1)
    as_of = format_lsn(current_lsn(env))
    wait_captured(env, current_lsn(env))
    copied = copy_to_kafka(env, kafka_bootstrap, unique_name, table="orders")
    plain, chunked = kafka_configs(env, tmp_path, kafka_bootstrap, unique_name)
    topic = f"{unique_name}.public.orders"
    chunks = tmp_path / "chunks"
    assert "written=" in columnar(env, "--chunk-offsets", "20", config=chunked)
    early = len(list(chunks.rglob("*.json")))
    assert early >= 3

    env.sql("ALTER TABLE orders ADD COLUMN extra int")
    workload(env, rng, 25, 1000, extra=True)
    wait_captured(env, current_lsn(env))
    copy_to_kafka(env, kafka_bootstrap, unique_name, copied, table="orders")
    want = outputs(spark, env, tmp_path / "kafka", as_of, plain)
    assert want[0]["now"][0] > 0
    want_now = materialized(want)
    assert outputs(spark, env, tmp_path / "early-chunks", None, chunked) == want_now

    # killed between a chunk's file and its manifest (the same steps as the file log's
    # companions): the chunk is never read, and the next round writes it again
    columnar_killed_at(env, "columnar.before_manifest:2", "--chunk-offsets", "20",
                       config=chunked)
    report = columnar(env, "--chunk-offsets", "20", config=chunked)
    assert f"{topic}: written=" in report and " removed=1 " in report, report
    manifests = sorted(chunks.rglob("*.json"))
    assert len(manifests) >= early + 3
    assert not any(p.name.startswith(".tmp-") for p in chunks.rglob("*")), "leftovers"
    assert outputs(spark, env, tmp_path / "chunks-out", as_of, chunked) == want

    # a damaged chunk is passed over (and said so): Kafka from there on
    parquet = manifests[-1].with_suffix(".parquet")  # partition 2: 0 is trimmed below
    data = bytearray(parquet.read_bytes())
    data[len(data) // 2] ^= 0xFF
    parquet.write_bytes(bytes(data))
    with caplog.at_level("WARNING"):
        assert outputs(spark, env, tmp_path / "damaged", None, chunked) == want_now
    assert any("is damaged" in r.getMessage() for r in caplog.records)

    # retention: partition 0 keeps its records from inside its second chunk on
    partition0 = sorted(chunks.rglob("partition=0/*.json"))
    second = orjson.loads(partition0[1].read_bytes())
    delete_records(kafka_bootstrap, topic, 0, second["start"] + 1)
    trimmed = outputs(spark, env, tmp_path / "trimmed", None, plain)
    assert trimmed != want_now
    assert outputs(spark, env, tmp_path / "trimmed-chunks", None, chunked) == trimmed
    report = columnar(env, "--chunk-offsets", "20", config=chunked)
    assert not partition0[0].exists() and partition0[1].exists(), report


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    """Kafka's retention by hand: remove the partition's records below ``before``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([KafkaTopicPartition(topic, partition, before)],
                                   request_timeout=30)
    for future in futures.values():
        assert future.result(30).low_watermark == before
