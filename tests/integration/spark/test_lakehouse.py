"""``cdc replay materialize --format delta`` against PostgreSQL through the real capture
(a file log, and the same events copied to a Kafka log):
the Delta table equals the table's rows after a first full write, after incremental
updates, after kills before and after an update's commit, after a schema change and after
a truncate; ``deltalake`` (no Spark, no JVM) reads it, and its first version (Delta's time
travel) equals ``state-as-of`` at the LSN that version's metadata names."""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable, QueryBuilder
from deltalake.exceptions import TableNotFoundError

from cdc.capture.lsn import format_lsn
from cdc.capture.runner import Capture
from cdc.cli import main
from spark_pipelines.checksum import python_checksum
from spark_pipelines.columnar import plan
from tests.integration.capture.conftest import CaptureEnv, capture_env, run_capture
from tests.integration.spark.test_columnar import columnar, small_segments
from tests.integration.spark.test_replay_materialize import (
    copy_to_kafka,
    current_lsn,
    replay,
    rows_of,
    wait_captured,
    workload,
)
from tests.processes import start_cdc_run, stop_or_fail

pytestmark = pytest.mark.integration
__all__ = ["capture_env", "run_capture"]

TABLE = "public.items"
STORED = ("_lsn", "_seq", "_key", "_hash")


def delta_run(env: CaptureEnv, out: Path, crash_at: str | None = None,
              config: Path | None = None) -> tuple[tuple[int, str], str]:
    """``cdc replay materialize --format delta``: (rows, checksum) and how the table was
    brought up to date. In process, in the test's Spark session (Delta's extension is on
    it); killed at ``crash_at`` in its own process (its own session, ``local[1]``)."""
    args = ["replay", "materialize", "-c", str(config or env.config_path), "--tables", TABLE,
            "--output", str(out), "--format", "delta", "--master", "local[1]", "--no-progress"]
    if crash_at is not None:
        done = subprocess.run(
            [sys.executable, "-m", "cdc.cli", *args],
            env={**os.environ, "DISTRIBUTARY_CRASH_AT": crash_at}, capture_output=True,
            text=True, timeout=600, check=False)
        assert done.returncode == -9, (done.returncode, done.stdout, done.stderr[-3000:])
        return (0, ""), ""
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, (result.output, result.exception)
    line = next(line for line in result.stdout.splitlines()
                if line.startswith(f"{TABLE}: rows="))
    rows, checksum = line.removeprefix(f"{TABLE}: rows=").split(" checksum=")
    how = " ".join(result.stderr.split())  # the console wraps long lines
    return (int(rows), checksum.split()[0]), how


def read_without_spark(path: Path, version: int | None = None) -> tuple[int, str]:
    """The table's checksum read by ``deltalake`` (its query engine: column mapping too)."""
    table = DeltaTable(str(path), version=version)
    rows = pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t")
                    .read_all()).to_pylist()
    return python_checksum({k: v for k, v in row.items() if k not in STORED} for row in rows)


def items_captured(env: CaptureEnv, run_capture: Callable[[], Capture]) -> CaptureEnv:
    """The ``items`` table (as ``test_replay_materialize``'s workload writes it), captured."""
    env.sql("CREATE TABLE items (id bigint PRIMARY KEY, name text, price numeric(12,2), "
            "at timestamptz, flag bool)")
    run_capture()
    return env


def test_delta_table_follows_the_log_exactly(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture], spark: Any,
        tmp_path: Path) -> None:
    small_segments(capture_env)  # sealed segments, and their columnar companions
    env = items_captured(capture_env, run_capture)
    rng = random.Random(20261129)
    out = tmp_path / "lake"
    path = out / TABLE

    def caught_up() -> tuple[int, str]:
        wait_captured(env, current_lsn(env))
        return python_checksum(rows_of(env))

    for chunk in range(12):  # a segment rolls between two of the capture's appends
        workload(env, rng, 5, 1 + 100 * chunk, with_note=False)
        wait_captured(env, current_lsn(env))
    first = caught_up()
    assert first[0] > 0
    report = columnar(env)
    assert f"{env.topic('items')}: written=" in report, report
    ends = {p: 1 << 62 for p in range(3)}
    assert plan(env.log_dir, env.topic("items"), ends).companions, (report, sorted(
        str(f.relative_to(env.log_dir)) for f in env.log_dir.rglob("*.jsonl")))
    got, how = delta_run(env, out)
    assert got == first and "written whole (no Delta table" in how, how

    for chunk in range(12):
        workload(env, rng, 5, 2000 + 100 * chunk, with_note=False)
        wait_captured(env, current_lsn(env))
    want = caught_up()
    columnar(env)
    got, how = delta_run(env, out)  # the new events: companions, then JSON
    assert got == want and "updated from offsets" in how, how
    assert read_without_spark(path) == want  # deltalake: Rust, no JVM

    # time travel: version 0 is the state as of the LSN its commit names
    history = DeltaTable(str(path)).history()
    positions = {entry["version"]: orjson.loads(entry["userMetadata"])["distributary"]
                 for entry in history}
    assert sorted(positions) == [0, 1]
    assert read_without_spark(path, version=0) == first
    as_of = format_lsn(positions[0]["lsn"])
    past = replay("state-as-of", "-c", str(env.config_path), "--tables", TABLE,
                  "--output", str(tmp_path / "parquet"), "--as-of", as_of)
    assert past[TABLE] == first
    named = CliRunner().invoke(main, [
        "replay", "versions", "-c", str(env.config_path), "--tables", TABLE,
        "--output", str(out), "--as-of", as_of, "--no-progress"])
    assert named.exit_code == 0, (named.output, named.exception)
    assert named.stdout.startswith(f"{TABLE}: version=0 lsn={as_of} offsets="), named.stdout

    # killed before the MERGE: nothing committed; killed right after it: committed once
    workload(env, rng, 10, 4000, with_note=False)
    want = caught_up()
    delta_run(env, out, crash_at="lakehouse.before_merge")
    assert DeltaTable(str(path)).version() == 1
    delta_run(env, out, crash_at="lakehouse.after_merge")
    assert DeltaTable(str(path)).version() == 2
    got, how = delta_run(env, out)
    assert got == want and "unchanged at version 2" in how, how
    assert read_without_spark(path) == want

    # new columns (schema version 2; a name Delta takes only with column mapping), then a
    # truncate: written whole, still exact; then updated again
    env.sql('ALTER TABLE items ADD COLUMN note text, ADD COLUMN "Odd `Name`.x, y" text',
            'UPDATE items SET "Odd `Name`.x, y" = \'odd \' || id')
    workload(env, rng, 10, 5000, with_note=True)
    want = caught_up()
    got, how = delta_run(env, out)
    assert got == want and "written whole (schema version 2 since version 1)" in how, how
    env.sql("TRUNCATE items")
    workload(env, rng, 6, 6000, with_note=True)
    want = caught_up()
    got, how = delta_run(env, out)
    assert got == want and "written whole (the new events hold a truncate" in how, how
    assert read_without_spark(path) == want
    workload(env, rng, 8, 7000, with_note=True)
    want = caught_up()
    got, how = delta_run(env, out)
    assert got == want and "updated from offsets" in how, how
    assert read_without_spark(path) == want
    now = replay("materialize", "-c", str(env.config_path), "--tables", TABLE,
                 "--output", str(tmp_path / "parquet"))
    assert now[TABLE] == want


def test_delta_table_of_a_kafka_log_is_updated_from_its_offsets(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture], spark: Any, tmp_path: Path,
        kafka_bootstrap: str, unique_name: str) -> None:
    env = items_captured(capture_env, run_capture)
    rng = random.Random(20261130)
    config = tmp_path / "kafka.yaml"
    config.write_text(f"source:\n  dsn: {env.dsn}\n  slot: {env.slot}\n"
                      f"  publication: {env.slot}\n"
                      f"log:\n  backend: kafka\n  bootstrap_servers: [{kafka_bootstrap}]\n"
                      f"  topic_prefix: {unique_name}\n")
    out = tmp_path / "lake"
    workload(env, rng, 12, 1, with_note=False)
    wait_captured(env, current_lsn(env))
    copied = copy_to_kafka(env, kafka_bootstrap, unique_name)
    got, how = delta_run(env, out, config=config)
    assert got == python_checksum(rows_of(env)) and "written whole" in how, how
    workload(env, rng, 12, 1000, with_note=False)
    wait_captured(env, current_lsn(env))
    copy_to_kafka(env, kafka_bootstrap, unique_name, copied)
    want = python_checksum(rows_of(env))
    got, how = delta_run(env, out, config=config)
    assert got == want and "updated from offsets" in how, how
    assert read_without_spark(out / TABLE) == want


def test_cdc_run_keeps_the_delta_tables_up_to_date(
        capture_env: CaptureEnv, tmp_path: Path) -> None:
    """``spark.lakehouse_every``: ``cdc run`` runs ``cdc replay materialize --format delta
    --every`` beside the capture, and stops it with the pipeline."""
    env = capture_env
    env.sql("CREATE TABLE items (id bigint PRIMARY KEY, name text, price numeric(12,2), "
            "at timestamptz, flag bool)")
    lake = tmp_path / "lake"
    env.config_path.write_text(env.config_path.read_text()
                               + f"spark:\n  lakehouse_every: 1s\n  output_path: {lake}\n")
    stderr = tmp_path / "cdc-run.log"
    run = start_cdc_run(env.config_path, stderr)
    try:
        rng = random.Random(20261131)
        for first_id in (1, 1000):  # the second round of changes reaches an existing table
            workload(env, rng, 10, first_id, with_note=False)
            wait_captured(env, current_lsn(env))
            want = python_checksum(rows_of(env))
            deadline = time.monotonic() + 240
            while True:
                with contextlib.suppress(TableNotFoundError):
                    if read_without_spark(lake / TABLE) == want:
                        break
                assert run.poll() is None, stderr.read_text()[-3000:]
                assert time.monotonic() < deadline, stderr.read_text()[-3000:]
                time.sleep(1)
    finally:
        code = stop_or_fail(run)
    assert code == 0, stderr.read_text()[-3000:]
    log = stderr.read_text()
    assert "lakehouse: public.items: updated from offsets" in log
    assert '"level": "ERROR"' not in log, "Spark's notices are no errors of the pipeline"
    operations = [entry["operation"] for entry in DeltaTable(str(lake / TABLE)).history()]
    assert operations[-1] == "WRITE" and "MERGE" in operations, operations
