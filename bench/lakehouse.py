"""A Delta table of a 3 M-event log, then updated with 100 k events more
(``make bench-lakehouse``).

The logs are ``bench.spark``'s (1 M keys; every key inserted, then updates of random keys,
2 % deletes), written twice with the same seed: 3 M events, then 3.1 M events whose first
3 M are the same records at the same offsets. One Spark session (``local[2]``, Delta's
extension) first writes the table from the 3 M-event log (``lakehouse_full_3m_events_s``:
the state of every key, typed, written, counted and checksummed), then brings it up to the
3.1 M-event log (``lakehouse_incremental_100k_events_s``: the new events' newest per key,
MERGEd, then counted and checksummed). ``lakehouse_incremental_ratio_vs_full`` is the
second over the first (target ≤ 0.1); both times are inside the session, the JVM's start
left out.

``BENCH_SPARK_SCALE`` (default 1.0) shrinks the logs for a quick look.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import SparkSession

from bench.spark import TABLE, pipeline_file, write_log
from cdc.config.loader import load_config
from spark_pipelines.lakehouse import update_lakehouse, with_delta
from spark_pipelines.session import spark_session
from spark_pipelines.source import LogSource
from spark_pipelines.state import load_histories


def _update(spark: SparkSession, config_path: Path, target: Path) -> tuple[float, str]:
    config = load_config(config_path)
    source = LogSource.of(config)
    started = time.perf_counter()
    history = load_histories(source)[TABLE]
    result = update_lakehouse(spark, source, history, target)
    return time.perf_counter() - started, f"rows={result.rows} {result.warnings[-1]}"


def main() -> None:
    scale = float(os.environ.get("BENCH_SPARK_SCALE", "1.0"))
    keys, events, more = int(1_000_000 * scale), int(3_000_000 * scale), int(100_000 * scale)
    workdir = Path(tempfile.mkdtemp(prefix="bench-lakehouse-"))
    try:
        write_log(workdir / "log3", events, keys)
        write_log(workdir / "log3plus", events + more, keys)
        before = pipeline_file(workdir, workdir / "log3", "before")
        after = pipeline_file(workdir, workdir / "log3plus", "after")
        conf = with_delta(load_config(before).spark.conf)
        target = workdir / "lake" / TABLE
        with spark_session("local[2]", conf, app_name="bench-lakehouse") as spark:
            full_s, how = _update(spark, before, target)
            print(how, file=sys.stderr)
            print(f"lakehouse_full_3m_events_s={full_s:.1f}", flush=True)
            incremental_s, how = _update(spark, after, target)
            print(how, file=sys.stderr)
            print(f"lakehouse_incremental_100k_events_s={incremental_s:.1f}", flush=True)
        print(f"lakehouse_incremental_ratio_vs_full={incremental_s / full_s:.2f}", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
