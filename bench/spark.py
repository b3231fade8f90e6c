"""Spark materialize: a 3 M-event log and a 6 M-event log over the same 1 M keys
(``make bench-spark``).

Both logs are written straight in the file log's format (segment files encoded with the
log's own codec, no capture), for a table ``orders(id, customer_id, status, amount
numeric(12,2), note, created_at timestamptz)``: every key inserted once, then updates of
random keys (2 % deletes). Each log is materialized from its JSON lines with ``cdc replay
materialize`` on ``local[2]`` (Parquet written, rows counted, checksum computed): how the
time scales with the log is ``spark_scaling_ratio_2x_log`` (target ≤ 2.2).

Then ``cdc log columnar`` writes the 3 M-event log's companions (its default: one core;
``spark_columnar_write_3m_events_s``) and the log is materialized again, from the companions
of its sealed segments and the JSON of each partition's last segment:
``spark_materialize_3m_events_s`` (target ≤ 20), and ``spark_columnar_ratio_vs_json``, its
throughput over the JSON path's (the mean of a JSON run before and one after, the
companions set aside; above 1: the companions are faster).

Last, the 3 M-event log from its companions on a Spark standalone cluster of two one-core
workers (``SparkStandaloneCluster``, started after the local runs so it does not compete
with them): ``spark_standalone_ratio_vs_local`` is its throughput divided by
``local[2]``'s (above 1: the cluster is faster).

``BENCH_SPARK_SCALE`` (default 1.0) shrinks both logs for a quick look.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from cdc.log.file.codec import encode_record
from cdc.log.file.segments import segment_name
from cdc.log.file.topics import TopicMeta, write_meta
from cdc.log.partitioner import partition_for
from cdc.log.records import Position
from compose.launcher.spark_standalone import SparkStandaloneCluster
from spark_pipelines.companions import COLUMNAR_DIR

PREFIX = "bench"
TABLE = "public.orders"
TOPIC = f"{PREFIX}.{TABLE}"
PARTITIONS = 4
SEGMENT_BYTES = 64 * 1024**2
EVENTS_PER_TRANSACTION = 100
COLUMNS = [("id", "pg_catalog.int8", -1, True), ("customer_id", "pg_catalog.int4", -1, False),
           ("status", "pg_catalog.text", -1, False),
           ("amount", "pg_catalog.numeric", ((12 << 16) | 2) + 4, False),
           ("note", "pg_catalog.text", -1, False),
           ("created_at", "pg_catalog.timestamptz", -1, False)]
STATUSES = ("new", "paid", "shipped", "delivered", "returned")


class PartitionWriter:
    """Appends encoded lines to one partition's segments, rolling at ``SEGMENT_BYTES``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.offset = 0
        self.size = 0
        self.file = open(directory / segment_name(0), "wb")  # noqa: SIM115

    def append(self, key: bytes, value: bytes, position: Position, tombstone: bool) -> None:
        if self.size >= SEGMENT_BYTES:
            self.file.close()
            self.file = open(self.directory / segment_name(self.offset), "wb")  # noqa: SIM115
            self.size = 0
        line = encode_record(self.offset, 1_763_719_200_000, position, tombstone, key, value)
        self.file.write(line)
        self.size += len(line)
        self.offset += 1

    def close(self) -> None:
        self.file.close()


def _changes(events: int, keys: int, seed: int) -> Iterator[tuple[str, int]]:
    rng = random.Random(seed)
    for key in range(1, keys + 1):
        yield "c", key
    for _ in range(events - keys):
        yield ("d" if rng.random() < 0.02 else "u"), rng.randint(1, keys)


def write_log(root: Path, events: int, keys: int, seed: int = 7) -> None:
    """A file log at ``root`` with ``events`` events over ``keys`` keys (see the module
    docstring), and the table's schema record."""
    write_meta(root, TOPIC, TopicMeta(PARTITIONS))
    writers = [PartitionWriter(root / TOPIC / f"partition={p}") for p in range(PARTITIONS)]
    rng = random.Random(seed + 1)
    lsn, seq = 0x1000000, 0
    for number, (op, key) in enumerate(_changes(events, keys, seed)):
        if number % EVENTS_PER_TRANSACTION == 0:
            lsn, seq = lsn + 4096, 0
        key_bytes = b'{"id":%d}' % key
        after = None if op == "d" else {
            "id": key, "customer_id": key % 50_000, "status": STATUSES[number % 5],
            "amount": f"{rng.randint(0, 10**7) / 100:.2f}", "note": f"note {number}",
            "created_at": f"2026-0{1 + key % 9}-1{key % 10}T10:{key % 60:02d}:00.{key % 997}Z"}
        value = orjson.dumps({
            "op": op, "key": {"id": key}, "before": None, "after": after, "unchanged": [],
            "source": {"db": "app", "schema": "public", "table": "orders", "lsn": str(lsn),
                       "commit_lsn": str(lsn), "seq": seq, "txid": lsn // 4096,
                       "commit_ts": "2026-11-21T10:00:00.123456Z", "snapshot": False},
            "schema_version": 1})
        writers[partition_for(key_bytes, PARTITIONS)].append(key_bytes, value,
                                                             Position(lsn, seq), op == "d")
        seq += 1
    for writer in writers:
        writer.close()
    schema_topic = f"{PREFIX}._schemas"
    write_meta(root, schema_topic, TopicMeta(1))
    schema = orjson.dumps({"schema": "public", "table": "orders", "schema_version": 1,
                           "columns": [{"name": n, "type": t, "type_modifier": m, "key": k}
                                       for n, t, m, k in COLUMNS]})
    with open(root / schema_topic / "partition=0" / segment_name(0), "wb") as file:
        file.write(encode_record(0, 0, Position(0, 0), False, b'"public.orders"', schema))


def pipeline_file(workdir: Path, log_root: Path, name: str) -> Path:
    """A pipeline file for the log at ``log_root`` (the jobs' output under ``name``)."""
    config = workdir / f"{name}.yaml"
    config.write_text(f"source:\n  dsn: postgresql://127.0.0.1:1/none\n  slot: {PREFIX}\n"
                      f"  publication: {PREFIX}\n"
                      f"log:\n  backend: file\n  path: {log_root}\n"
                      f"spark:\n  output_path: {workdir / name / 'out'}\n"
                      "  conf:\n    spark.driver.memory: 1g\n"
                      "    spark.sql.shuffle.partitions: 8\n"
                      f"    spark.local.dir: {workdir / 'spark-tmp'}\n")
    return config


def cdc_seconds(*args: str) -> float:
    """Run ``cdc ARGS`` (its own process and JVM), time it, and echo its last line."""
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "cdc.cli", *args],
                            capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"cdc {args[:2]} failed:\n{result.stdout}\n{result.stderr[-4000:]}")
    print(result.stdout.strip().splitlines()[-1], file=sys.stderr)
    return elapsed


def materialize_seconds(workdir: Path, log_root: Path, name: str,
                        master: str = "local[2]") -> float:
    """Run ``cdc replay materialize`` on ``log_root`` (``local[2]`` unless another master
    is given) and time it."""
    return cdc_seconds("replay", "materialize", "-c", str(pipeline_file(workdir, log_root, name)),
                       "--master", master, "--tables", TABLE, "--no-progress")


def main() -> None:
    scale = float(os.environ.get("BENCH_SPARK_SCALE", "1.0"))
    keys, small, large = int(1_000_000 * scale), int(3_000_000 * scale), int(6_000_000 * scale)
    workdir = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    try:
        started = time.perf_counter()
        write_log(workdir / "log3", small, keys)
        write_log(workdir / "log6", large, keys)
        print(f"spark_log_generation_s={time.perf_counter() - started:.1f}", flush=True)
        small_s = materialize_seconds(workdir, workdir / "log3", "m3")
        print(f"spark_materialize_3m_events_json_s={small_s:.1f}", flush=True)
        large_s = materialize_seconds(workdir, workdir / "log6", "m6")
        print(f"spark_materialize_6m_events_json_s={large_s:.1f}", flush=True)
        print(f"spark_scaling_ratio_2x_log={large_s / small_s:.2f}", flush=True)
        write_s = cdc_seconds("log", "columnar", "-c",
                              str(pipeline_file(workdir, workdir / "log3", "c3")))
        print(f"spark_columnar_write_3m_events_s={write_s:.1f}", flush=True)
        columnar_s = materialize_seconds(workdir, workdir / "log3", "c3")
        print(f"spark_materialize_3m_events_s={columnar_s:.1f}", flush=True)
        companions = workdir / "log3" / COLUMNAR_DIR
        companions.rename(companions.with_name("companions-aside"))  # JSON only again
        json_again_s = materialize_seconds(workdir, workdir / "log3", "m3")
        companions.with_name("companions-aside").rename(companions)
        print(f"spark_materialize_3m_events_json_again_s={json_again_s:.1f}", flush=True)
        # the same log, so throughput over throughput is time over time (the JSON side:
        # the mean of its runs before and after)
        print(f"spark_columnar_ratio_vs_json={(small_s + json_again_s) / 2 / columnar_s:.2f}",
              flush=True)
        with SparkStandaloneCluster(workers=2) as cluster:
            cluster_s = materialize_seconds(workdir, workdir / "log3", "s3",
                                            master=cluster.master_url)
        print(f"spark_materialize_3m_events_standalone_s={cluster_s:.1f}", flush=True)
        # the same log, so throughput (events/s) over throughput is time over time
        print(f"spark_standalone_ratio_vs_local={columnar_s / cluster_s:.2f}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
