"""One chaos run: servers, pipeline, workload and faults, then the checks.

The log is the file backend on a small tmpfs (so the disk can be filled; one capture)
or Kafka (``backend="kafka"``: two capture replicas that take over from each other, on
the cluster given, else the Kafka named by ``DISTRIBUTARY_TEST_KAFKA_BOOTSTRAP``, else a
3-broker cluster the harness starts; no disk-full fault then, and brokers are killed
only on a cluster the harness was handed or started). The run begins with an initial
snapshot of rows that predate the slot, interrupted by the faults of ``snapshot_faults``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import re
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import yaml

from cdc.capture.lsn import parse_lsn
from cdc.config import PipelineConfig, load_config
from cdc.log.open import open_log
from compose.launcher.kafka import KafkaCluster

from .diskfill import SmallFilesystem
from .faults import FaultInjector, FaultPlan, schedule
from .processes import SupervisedProcess
from .replicas import CaptureReplicas
from .schema import TABLES, create_schema
from .servers import ChaosServers
from .snapshot_faults import SnapshotPlan, interrupted_snapshot, prefill
from .verify import Findings, check_all
from .workload import Workload, WorkloadPlan, WorkloadStats

log = logging.getLogger(__name__)

NAME = "chaos"
CONNECTORS = ("search", "cache")


@dataclass(frozen=True)
class ChaosOptions:
    """One run's size: how long the workload writes, and what it and the faults do."""

    duration: float
    faults: FaultPlan
    workload: WorkloadPlan
    log_fs_bytes: int
    seed: int
    catch_up_s: float
    snapshot: SnapshotPlan
    keep_logs: Path | None = None  # copy the children's output here at the end
    backend: str = "file"  # or "kafka"
    kafka_bootstrap: str | None = None  # kafka: these brokers (else the env's, or started)
    kafka_cluster: KafkaCluster | None = None  # kafka: this cluster (its brokers killed)


def full_options(duration: float, seed: int) -> ChaosOptions:
    """``make chaos``: ≥ 20 kills of each kind, 60 s outages, 200,000-row transactions."""
    return ChaosOptions(
        duration=duration, seed=seed, catch_up_s=900,
        faults=FaultPlan(kill_capture=22, kill_connect=22, stop_opensearch=1, stop_redis=1,
                         restart_postgres=2, fill_disk=1, outage_s=60, disk_full_s=20,
                         stall_capture=10, kill_broker=3),
        workload=WorkloadPlan(rate=25, large_rows=200_000, large_every_s=duration / 4,
                              truncate_every_s=45),
        snapshot=SnapshotPlan(bulk_rows=200_000, other_rows=20_000, crash_at_batch=20),
        log_fs_bytes=2 << 30)


def short_options(duration: float, seed: int) -> ChaosOptions:
    """The version inside ``make test``: a few faults of each kind, small large txns."""
    return ChaosOptions(
        duration=duration, seed=seed, catch_up_s=180,
        faults=FaultPlan(kill_capture=3, kill_connect=3, stop_opensearch=1, stop_redis=1,
                         restart_postgres=1, fill_disk=1, outage_s=4, disk_full_s=4,
                         stall_capture=1, kill_broker=1),
        workload=WorkloadPlan(rate=20, large_rows=5_000, large_every_s=duration / 3,
                              truncate_every_s=15),
        snapshot=SnapshotPlan(bulk_rows=30_000, other_rows=5_000, crash_at_batch=2),
        log_fs_bytes=256 << 20)


@dataclass
class ChaosResult:
    """What happened and what the checks found."""

    runs: int
    faults: dict[str, int]
    fault_errors: list[str]
    workload: WorkloadStats
    findings: Findings
    unexpected_exits: int
    takeovers: int = 0  # of the slot by another capture replica

    @property
    def fault_total(self) -> int:
        return sum(self.faults.values())

    @property
    def ok(self) -> bool:
        found = self.findings
        return not (found.lost or found.duplicated or found.diverged or self.fault_errors)

    def summary(self) -> str:
        """The last line of the run."""
        found = self.findings
        return (f"chaos: runs={self.runs} faults={self.fault_total} "
                f"takeovers={self.takeovers} lost={found.lost} "
                f"duplicated={found.duplicated} diverged={found.diverged}")


def write_pipeline(workdir: Path, log_dir: Path, servers: ChaosServers, dsn: str,
                   kafka: str | None = None) -> Path:
    """The run's pipeline file: its own slot, log (or topic prefix), index and keys."""
    prefix = NAME if kafka is None else f"{NAME}_{uuid.uuid4().hex[:8]}"
    topics = [f"{prefix}.public.{table}" for table in TABLES]
    # the cache follows a pattern (resolved against the log's topics on both backends)
    pattern = re.escape(prefix) + r"\.public\.(?:" + "|".join(TABLES) + ")"
    retry = {"initial_backoff": "200ms", "max_backoff": "2s"}
    log_section: dict[str, Any] = {
        "backend": "file", "path": str(log_dir), "topic_prefix": prefix, "partitions": 3,
        "retention": {"time": "forever", "size": "forever"}, "segment_bytes": "8MiB",
        "fsync": True}
    if kafka is not None:
        log_section = {"backend": "kafka", "bootstrap_servers": kafka.split(","),
                       "topic_prefix": prefix, "partitions": 3}
    data: dict[str, Any] = {
        "source": {"dsn": dsn, "slot": NAME, "publication": NAME,
                   "tables": [f"public.{table}" for table in TABLES],
                   "snapshot": "initial", "heartbeat_interval": "1s"},
        "log": log_section,
        "connectors": [
            {"name": "search", "type": "opensearch", "topics": topics, "batch_size": 2_000,
             "batch_timeout": "200ms", "retry": retry,
             "config": {"hosts": [servers.opensearch.url], "index": f"{NAME}_{{table}}",
                        "request_timeout": "20s"}},
            {"name": "cache", "type": "redis", "topic_pattern": pattern, "batch_size": 2_000,
             "batch_timeout": "200ms", "retry": retry,
             "config": {"url": servers.redis.url, "key_template": f"{NAME}:{{table}}:{{key}}",
                        "timeout": "3s"}},
        ],
    }
    path = workdir / "pipeline.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    load_config(path)  # fails here, not in the children, if the file is wrong
    return path


def wait_until(check: Any, timeout: float, what: str) -> None:
    """Poll ``check`` until true; RuntimeError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting until {what}")
        time.sleep(0.5)


def slot_flushed_past(dsn: str, target: int, slot: str = NAME) -> bool:
    """True once ``slot`` has confirmed everything up to ``target`` (False while the
    server does not answer)."""
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            row = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                               "WHERE slot_name = %s", (slot,)).fetchone()
    except psycopg.OperationalError:
        return False
    return row is not None and row[0] is not None and parse_lsn(row[0]) >= target


def groups_caught_up(config: PipelineConfig, tables: tuple[str, ...] = TABLES,
                     groups: tuple[str, ...] = CONNECTORS) -> bool:
    """True once every group has committed the end of every partition of the tables'
    topics."""
    event_log = open_log(config.log)
    try:
        admin = event_log.admin()
        topics = {config.topic_for("public", table) for table in tables} & set(admin.topics())
        for group in groups:
            lags = {(lag.topic, lag.partition): lag.committed or 0
                    for lag in admin.group_lag(group)}
            for topic in topics:
                for info in admin.partitions(topic):
                    if lags.get((topic, info.partition), 0) < info.end_offset:
                        return False
        return True
    finally:
        event_log.close()


def _kafka(options: ChaosOptions,
           started: list[KafkaCluster]) -> tuple[str | None, KafkaCluster | None]:
    """The Kafka bootstrap address of a ``kafka`` run, and the cluster whose brokers the
    faults may kill (None when the brokers are someone else's); (None, None) for the
    file backend."""
    if options.backend != "kafka":
        return None, None
    if options.kafka_cluster is not None:
        return options.kafka_cluster.bootstrap_servers, options.kafka_cluster
    named = options.kafka_bootstrap or os.environ.get("DISTRIBUTARY_TEST_KAFKA_BOOTSTRAP")
    if named:
        return named, None
    cluster = KafkaCluster(3)
    cluster.start()
    started.append(cluster)
    return cluster.bootstrap_servers, cluster


def _plan_for(options: ChaosOptions, cluster: KafkaCluster | None) -> FaultPlan:
    """The faults this log can take: the disk fills only under the file log; replicas
    stall and brokers die only on Kafka (brokers only on a cluster the harness owns)."""
    plan = options.faults
    if options.backend == "kafka":
        plan = dataclasses.replace(plan, fill_disk=0)
    else:
        plan = dataclasses.replace(plan, stall_capture=0, kill_broker=0)
    if cluster is None:
        plan = dataclasses.replace(plan, kill_broker=0)
    return plan


def run_chaos(options: ChaosOptions) -> ChaosResult:
    """Start everything, write while faults strike, wait for quiet, check, stop all."""
    if options.backend not in ("file", "kafka"):
        raise ValueError(f"backend {options.backend!r}: use 'file' or 'kafka'")
    rng = random.Random(options.seed)
    workdir = Path(tempfile.mkdtemp(prefix="distributary-chaos-"))
    servers = ChaosServers()
    disk = SmallFilesystem(workdir / "logfs", options.log_fs_bytes)
    kafka_clusters: list[KafkaCluster] = []
    children: list[SupervisedProcess] = []
    stop, abort = threading.Event(), threading.Event()
    try:
        if options.backend == "file":
            disk.mount()
        servers.start()
        kafka, cluster = _kafka(options, kafka_clusters)
        plan = _plan_for(options, cluster)
        dsn = servers.postgres.create_database(NAME)
        create_schema(dsn)
        prefill(dsn, options.snapshot)
        log_dir = disk.mountpoint / "log"
        pipeline = write_pipeline(workdir, log_dir, servers, dsn, kafka)
        config = load_config(pipeline)
        captures = CaptureReplicas(2 if kafka else 1, pipeline, workdir, dsn, NAME)
        connect = SupervisedProcess("connect", ["connect", "-c", str(pipeline)],
                                    workdir / "connect.log")
        children += [*captures.processes, connect]
        workload = Workload(dsn, rng, options.workload)
        injector = FaultInjector(plan, servers, captures, connect, disk, cluster)
        interrupted_snapshot(dsn, NAME, captures.first, options.snapshot, injector.done,
                             injector.errors)
        captures.start()
        wait_until(lambda: _slot_exists(dsn), 60, "the capture created its slot")
        connect.start()
        writer = threading.Thread(target=workload.run, args=(stop,), name="workload",
                                  daemon=True)
        faults = threading.Thread(target=injector.run, name="faults", daemon=True, args=(
            schedule(plan, options.duration, rng), abort))
        writer.start()
        faults.start()
        time.sleep(options.duration)
        faults.join()  # every fault injected, the outages over: then the workload stops
        stop.set()
        writer.join()
        log.info("workload stopped after %d transactions; waiting for the pipeline",
                 workload.stats.transactions)
        target = current_lsn(dsn)
        failures = captures.failures + connect.failures
        wait_until(lambda: _not_crash_looping(children, failures)
                   and slot_flushed_past(dsn, target), options.catch_up_s,
                   f"the capture acknowledged everything ({_tails(captures.processes)})")
        wait_until(lambda: _not_crash_looping(children, failures)
                   and groups_caught_up(config), options.catch_up_s,
                   f"the connectors caught up ({connect.log_tail()})")
        event_log = open_log(config.log)  # checked while the pipeline runs (for reconcile)
        try:
            findings = check_all(dsn, event_log, config)
        finally:
            event_log.close()
        for child in children:
            child.stop()
        return ChaosResult(
            runs=captures.runs + connect.runs, faults=dict(injector.done),
            fault_errors=injector.errors, workload=workload.stats, findings=findings,
            unexpected_exits=sum(c.failures for c in children),
            takeovers=captures.takeovers())
    finally:
        stop.set()
        abort.set()
        for child in children:
            child.stop(timeout=20)
        servers.stop()
        for started in kafka_clusters:
            started.stop()
        if options.keep_logs is not None:
            options.keep_logs.mkdir(parents=True, exist_ok=True)
            for child in children:
                if child.log_path.exists():
                    shutil.copy(child.log_path, options.keep_logs / child.log_path.name)
            if options.backend == "file":
                shutil.copytree(disk.mountpoint / "log", options.keep_logs / "log",
                                dirs_exist_ok=True, ignore_dangling_symlinks=True)
        disk.unmount()
        shutil.rmtree(workdir, ignore_errors=True)


def _tails(children: list[SupervisedProcess], lines: int = 15) -> str:
    return "\n".join(f"--- {c.name}:\n{c.log_tail(lines)}" for c in children)


CRASH_LOOP = 8  # exits of a child, not caused by a fault, while waiting for quiet


def _not_crash_looping(children: list[SupervisedProcess], failures_before: int) -> bool:
    """True; RuntimeError with the output when the children keep failing on their own."""
    if sum(c.failures for c in children) - failures_before >= CRASH_LOOP:
        raise RuntimeError("cdc keeps exiting on its own after the faults ended:\n"
                           + _tails(children, 25))
    return True


def _slot_exists(dsn: str) -> bool:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s",
                            (NAME,)).fetchone() is not None


def current_lsn(dsn: str) -> int:
    """The server's current WAL position."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return parse_lsn(row[0])
