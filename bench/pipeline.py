"""The bulk workload through ``cdc run`` into Redis and into OpenSearch, against the
capture alone on the same changes in the same run (``make bench-pipeline``).

Starts PostgreSQL, Redis and OpenSearch, creates three slots back to back and runs the
bulk workload of ``bench.capture`` (one transaction inserting 1,000,000 rows, then one
updating 500,000: 1.5 M change events; ``BENCH_SCALE`` scales the rows). Then, one at a
time, each reading its own slot into its own durable file log (3 partitions):

1. ``cdc capture`` alone, timed until the log holds every event (``bench.capture``);
2. ``cdc run`` with one Redis connector (as the README deploys it), timed from its start
   until the connector's group has committed every event: each is then in Redis;
3. the same with one OpenSearch connector (every bulk request acknowledged), on a node
   warmed first by 450,000 plain and as many versioned index operations into throwaway
   indices (``warm_opensearch``: a cold node spent ~40 % of its CPU in the JIT compiler
   during the timed run).

Per pipeline: events/s, peak summed RSS of ``cdc run`` and its children, and the CPU
µs per event of each process (``cdc run``'s supervisor, capture and connector, the sink's
server, PostgreSQL: its walsender among them) — where the time goes. The headlines,
last: ``pipeline_redis_ratio_vs_capture`` and ``pipeline_opensearch_ratio_vs_capture``
(events/s through ``cdc run`` ÷ the capture's alone; targets ≥ 0.7 and ≥ 0.5).
``BENCH_PIPELINE_SINKS`` (default ``redis,opensearch``) picks the pipelines run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch

from bench.capture import bulk_workload, create_schema, create_slots, run_capture
from bench.procs import Sampler, cpu_seconds, role_names, server_pid
from bench.sinks import Event, warm_up
from cdc.log.file import FileLog
from compose.launcher import OpenSearchServer, PostgresServer, RedisServer

TIMEOUT_S = 1800.0
WARM_UP_DOCUMENTS = 300_000
SINKS = os.environ.get("BENCH_PIPELINE_SINKS", "redis,opensearch").split(",")


@dataclass(frozen=True, slots=True)
class Timed:
    """One pipeline's run: seconds, peak RSS, CPU seconds per role."""

    seconds: float
    peak_rss_mb: float
    cpu_s: dict[str, float]


def connector(kind: str, redis_url: str, search_url: str) -> dict[str, Any]:
    """The one connector of a ``cdc run`` (``batch_timeout`` as in ``bench.sinks``)."""
    if kind == "redis":
        return {"name": "cache", "type": "redis", "topics": [f"{kind}.public.orders"],
                "batch_timeout": "50ms",
                "config": {"url": redis_url, "key_template": "orders:{key}"}}
    return {"name": "search", "type": "opensearch", "topics": [f"{kind}.public.orders"],
            "batch_timeout": "50ms", "config": {"hosts": [search_url], "index": "orders"}}


def run_pipeline(dsn: str, kind: str, workdir: Path, events: int,
                 redis_url: str, search_url: str, servers: dict[str, int]) -> Timed:
    """``cdc run`` on slot ``kind`` with that one connector, until it committed ``events``;
    ``servers``: the pids of the servers whose CPU is counted (by role; 0: not found)."""
    log_dir = workdir / f"log-{kind}"
    config = workdir / f"{kind}.yaml"
    config.write_text(json.dumps({  # YAML is a superset of JSON
        "source": {"dsn": dsn, "slot": kind, "publication": "bench",
                   "heartbeat_interval": None},
        "log": {"backend": "file", "path": str(log_dir), "partitions": 3, "fsync": True},
        "connectors": [connector(kind, redis_url, search_url)]}))
    group = "cache" if kind == "redis" else "search"
    servers = {role: pid for role, pid in servers.items() if pid}
    before = {role: cpu_seconds(pid) for role, pid in servers.items()}
    started = time.perf_counter()
    with (workdir / f"{kind}.out").open("wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c", str(config)],
                                   stdout=output, stderr=subprocess.STDOUT)
    sampler = Sampler(process.pid)
    sampler.start()
    try:
        while not committed(log_dir, group, events):
            if process.poll() is not None:
                raise RuntimeError(f"cdc run stopped: see {workdir / (kind + '.out')}")
            if time.perf_counter() - started > TIMEOUT_S:
                raise TimeoutError(f"cdc run into {kind} did not finish in {TIMEOUT_S:.0f} s")
            time.sleep(0.1)
        seconds = time.perf_counter() - started
        sampler.sample()
    finally:
        sampler.stop()
        process.terminate()
        process.wait(timeout=60)
    names = role_names(sampler.cpu, process.pid)
    cpu = {names[pid]: seconds_used for pid, (_, seconds_used) in sampler.cpu.items()}
    cpu.update({role: cpu_seconds(pid) - before[role] for role, pid in servers.items()})
    return Timed(seconds, sampler.peak_mb, cpu)


def warm_opensearch(url: str) -> None:
    """Index orders-like documents into throwaway indices first: a user's OpenSearch has
    run for days, its JIT has long compiled Lucene's indexing and merge code, while the
    node this bench starts would spend ~40 % of its CPU in the compiler during the timed
    run (measured with JFR at ``BENCH_SCALE=0.3``)."""
    rows: list[Event] = [(key, {"id": key, "customer_id": key % 1000, "status": "new",
                   "amount": f"{key % 10_000 / 100:.2f}", "note": f"note {key}",
                   "created_at": "2026-11-21T10:00:00.123456+00:00"})
            for key in range(WARM_UP_DOCUMENTS)]
    client = OpenSearch([url], timeout=120)
    try:
        warm_up(client, rows + rows[: WARM_UP_DOCUMENTS // 2], count=len(rows) * 3 // 2)
    finally:
        client.close()


def committed(log_dir: Path, group: str, events: int) -> bool:
    """True once the log holds ``events`` records and ``group`` committed them all."""
    if not log_dir.exists():
        return False
    admin = FileLog(log_dir).admin()
    ends: dict[tuple[str, int], int] = {}
    for topic in admin.topics():
        if topic.endswith(".orders"):
            ends.update({(topic, p.partition): p.end_offset for p in admin.partitions(topic)})
    if sum(ends.values()) < events:
        return False
    done = {(lag.topic, lag.partition): lag.committed or 0 for lag in admin.group_lag(group)}
    return all(done.get(where, 0) >= end for where, end in ends.items())


def report(kind: str, timed: Timed, events: int) -> float:
    """Print one pipeline's figures; its events/s."""
    rate = events / timed.seconds
    print(f"pipeline_{kind}_events_per_s={rate:.0f}")
    print(f"pipeline_{kind}_peak_rss_mb={timed.peak_rss_mb:.0f}")
    for role, seconds in sorted(timed.cpu_s.items()):
        if seconds == 0:  # a process seen between fork and exec
            continue
        print(f"pipeline_{kind}_cpu_us_per_event_{role}={seconds / events * 1e6:.1f}")
    return rate


def main() -> None:
    """Start the servers, run the three sides, print the figures."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    os.chmod(workdir, 0o777)
    try:
        with (PostgresServer(settings={"max_wal_size": "4GB"}) as pg, RedisServer() as cache,
              OpenSearchServer() as search):
            dsn = pg.dsn()
            create_schema(dsn)
            create_slots(dsn, ["cap", "redis", "opensearch"])
            events = bulk_workload(dsn)
            capture_s, capture_rss, _ = run_capture(dsn, "cap", workdir, events)
            if "opensearch" in SINKS:
                warm_opensearch(search.url)
            servers = {role: server_pid(port) or 0 for role, port in
                       (("postgres", pg.port), ("redis", cache.port), ("opensearch", search.port))}
            timed = {kind: run_pipeline(dsn, kind, workdir, events, cache.url, search.url,
                                        {"postgres": servers["postgres"],
                                         kind: servers[kind]})
                     for kind in SINKS}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    capture_rate = events / capture_s
    print(f"pipeline_events={events}")
    print(f"pipeline_capture_events_per_s={capture_rate:.0f}")
    print(f"pipeline_capture_peak_rss_mb={capture_rss:.0f}")
    rates = {kind: report(kind, timed[kind], events) for kind in timed}
    for kind, rate in rates.items():
        print(f"pipeline_{kind}_ratio_vs_capture={rate / capture_rate:.2f}")


if __name__ == "__main__":
    main()
