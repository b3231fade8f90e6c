"""One soak run: servers, ``cdc run``, the workload, the faults and the samplers, then
the checks and the figures.

``cdc run`` (the capture and a Redis and an OpenSearch connector) runs as a supervised
child, with its log's retention and compaction active. After the initial snapshot of the
prefilled tables, the workload writes for ``minutes``; at fixed points of the run Redis
and OpenSearch are each down for ``outage_s``, the OpenSearch connector's process is
killed (SIGKILL; ``cdc run`` starts it again) and PostgreSQL restarts. Processes are
sampled every ``SAMPLE_S``, the end-to-end lag every second.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cdc.config import load_config
from cdc.log.open import open_log
from chaos.harness import current_lsn, groups_caught_up, slot_flushed_past, wait_until
from chaos.processes import SupervisedProcess
from chaos.servers import ChaosServers
from compose.launcher.base import free_port

from .check import Findings, check_all
from .figures import Fault, LagSample, Sample, clock_lag
from .probes import (
    ClockProbe,
    directory_mb,
    pipeline_metrics,
    pipeline_processes,
    process_stats,
    wal_retained_mb,
)
from .schema import CLOCK_TABLE, TABLES, create_schema
from .workload import Workload, WorkloadPlan, WorkloadStats

log = logging.getLogger(__name__)

NAME = "soak"
CONNECTORS = ("search", "cache")
KILLED_CONNECTOR = "search"
SAMPLE_S = 10.0
LAG_SAMPLE_S = 1.0


@dataclass(frozen=True)
class SoakOptions:
    """One run's length and load; the rest is derived from them."""

    minutes: float
    rate: float = 5_000.0
    accounts: int = 100_000
    out_dir: Path = Path("soak-results")

    @property
    def duration_s(self) -> float:
        return self.minutes * 60

    @property
    def warmup_s(self) -> float:
        return min(180.0, self.duration_s * 0.1)

    @property
    def outage_s(self) -> float:
        return min(120.0, self.duration_s / 15)

    @property
    def retention_s(self) -> float:
        return max(120.0, self.duration_s / 4)

    def at(self, share: float) -> float:
        """The moment ``share`` of the way through the run."""
        return self.duration_s * share

    def workload(self) -> WorkloadPlan:
        """Large transactions every sixth of the run, three migrations."""
        return WorkloadPlan(
            rate=self.rate, accounts=self.accounts, orders_alive_s=60,
            large_rows=self.accounts // 10,
            large_at=tuple(self.at(share) for share in (0.15, 0.35, 0.55, 0.7, 0.9)),
            migrations=((self.at(0.32), "ALTER TABLE orders ADD COLUMN note text"),
                        (self.at(0.52), "ALTER TABLE orders DROP COLUMN note"),
                        (self.at(0.82), "ALTER TABLE accounts ADD COLUMN tier int NOT NULL "
                                        "DEFAULT 1")))


@dataclass
class SoakResult:
    """The samples, the faults as they happened, the writer's and the checks' counts."""

    samples: list[Sample] = field(default_factory=list)
    lags: list[LagSample] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    fault_errors: list[str] = field(default_factory=list)
    workload: WorkloadStats = field(default_factory=WorkloadStats)
    findings: Findings = field(default_factory=Findings)
    catch_up_s: float = 0.0  # after the workload stopped, until the pipeline was quiet
    restarts: int = 0  # of cdc run itself (it should never exit)


def write_pipeline(workdir: Path, servers: ChaosServers, dsn: str, options: SoakOptions,
                   metrics_port: int) -> Path:
    """The run's pipeline file (retention and compaction on; see the module docstring)."""
    retry = {"initial_backoff": "200ms", "max_backoff": "2s"}
    data: dict[str, Any] = {
        "source": {"dsn": dsn, "slot": NAME, "publication": NAME,
                   "tables": [f"public.{table}" for table in TABLES],
                   "snapshot": "initial", "heartbeat_interval": "1s"},
        "log": {"backend": "file", "path": str(workdir / "log"), "topic_prefix": NAME,
                "partitions": 3, "segment_bytes": "8MiB",
                "retention": {"time": f"{int(options.retention_s)}s", "size": "forever"},
                "compaction": {"interval": f"{int(max(60, options.duration_s / 10))}s",
                               "min_dirty_ratio": 0.2}},
        "metrics": {"port": metrics_port},
        "connectors": [
            {"name": "search", "type": "opensearch",
             "topics": [f"{NAME}.public.{table}" for table in TABLES],
             "batch_size": 5_000, "batch_timeout": "100ms", "retry": retry,
             "config": {"hosts": [servers.opensearch.url], "index": f"{NAME}_{{table}}",
                        "request_timeout": "30s"}},
            {"name": "cache", "type": "redis",
             "topics": [f"{NAME}.public.{table}" for table in TABLES],
             "batch_size": 5_000, "batch_timeout": "50ms", "retry": retry,
             "config": {"url": servers.redis.url, "key_template": f"{NAME}:{{table}}:{{key}}",
                        "timeout": "5s"}},
        ],
    }
    path = workdir / "pipeline.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    load_config(path)  # fails here, not in cdc run, if the file is wrong
    return path


class Run:
    """The moving parts of one run (see ``run_soak``)."""

    def __init__(self, options: SoakOptions, workdir: Path) -> None:
        self.options = options
        self.workdir = workdir
        self.servers = ChaosServers()
        self.result = SoakResult()
        self.stop = threading.Event()
        self.started = 0.0  # monotonic time the workload started
        self.pipeline: SupervisedProcess | None = None
        self.probe: ClockProbe | None = None
        self.metrics_url = ""
        self.dsn = ""

    def now(self) -> float:
        return time.monotonic() - self.started

    def sample_lags(self, committed: list[int]) -> None:
        assert self.probe is not None
        while not self.stop.wait(LAG_SAMPLE_S):
            redis_clock, search_clock = self.probe.redis_clock(), self.probe.opensearch_clock()
            now_us = time.time_ns() // 1000
            self.result.lags.append(LagSample(self.now(),
                                              clock_lag(redis_clock, committed, now_us),
                                              clock_lag(search_clock, committed, now_us)))

    def sample_processes(self) -> None:
        assert self.pipeline is not None
        while not self.stop.wait(SAMPLE_S):
            pid = self.pipeline.pid
            processes = {}
            if pid is not None:
                for role, child in pipeline_processes(pid).items():
                    stats = process_stats(child)
                    if stats is not None:
                        processes[role] = stats
            metrics = pipeline_metrics(self.metrics_url)
            self.result.samples.append(Sample(
                self.now(), processes,
                capture_lag_s=metrics.capture_lag_s if metrics else None,
                connector_lag=metrics.connector_lag if metrics else {},
                wal_retained_mb=wal_retained_mb(self.dsn, NAME),
                log_mb=directory_mb(self.workdir / "log")))

    def inject_faults(self) -> None:
        options, servers = self.options, self.servers
        plan: list[tuple[float, str, Callable[[], None], Callable[[], None] | None]] = [
            (options.at(0.22), "redis_outage", servers.redis.stop_process,
             servers.redis.start_again),
            (options.at(0.42), "opensearch_outage", servers.opensearch.stop_process,
             servers.opensearch.start_again),
            (options.at(0.62), "kill_connector", self.kill_connector, None),
            (options.at(0.74), "restart_postgres", lambda: servers.postgres.restart("fast"),
             None),
        ]
        for when, kind, strike, undo in plan:
            if self.stop.wait(max(0.0, when - self.now())):
                return
            start = self.now()
            try:
                strike()
                if undo is not None:
                    self.stop.wait(options.outage_s)
                    undo()
            except Exception as exc:
                self.result.fault_errors.append(f"{kind}: {type(exc).__name__}: {exc}")
            self.result.faults.append(Fault(kind, start, self.now()))
            log.info("soak: %s from %.0f s to %.0f s", kind, start, self.now())

    def kill_connector(self) -> None:
        assert self.pipeline is not None and self.pipeline.pid is not None
        pid = pipeline_processes(self.pipeline.pid)[KILLED_CONNECTOR]
        os.kill(pid, signal.SIGKILL)


def run_soak(options: SoakOptions) -> SoakResult:
    """Start everything, write while faults strike, wait for quiet, check, stop all."""
    workdir = Path(tempfile.mkdtemp(prefix="distributary-soak-"))
    run = Run(options, workdir)
    servers, result = run.servers, run.result
    threads: list[threading.Thread] = []
    try:
        servers.start()
        run.dsn = servers.postgres.create_database(NAME)
        create_schema(run.dsn, options.accounts, options.workload().orders_alive)
        run.metrics_url = f"http://127.0.0.1:{(port := free_port())}/metrics"
        pipeline = write_pipeline(workdir, servers, run.dsn, options, port)
        run.pipeline = SupervisedProcess("run", ["run", "-c", str(pipeline)],
                                         workdir / "run.log")
        run.pipeline.start()
        run.probe = ClockProbe(servers.redis.url, f"{NAME}:{CLOCK_TABLE}:1",
                               servers.opensearch.url, f"{NAME}_{CLOCK_TABLE}")
        probe = run.probe
        wait_until(lambda: probe.redis_clock() is not None
                   and probe.opensearch_clock() is not None,
                   600, "the initial snapshot reached both sinks")
        workload = Workload(run.dsn, options.workload())
        result.workload = workload.stats
        run.started = time.monotonic()
        writing = threading.Event()
        work: list[tuple[Callable[..., None], tuple[Any, ...]]] = [
            (workload.run, (writing,)), (run.sample_lags, (workload.committed_clock,)),
            (run.sample_processes, ()), (run.inject_faults, ())]
        for function, args in work:
            thread = threading.Thread(target=function, args=args, daemon=True)
            thread.start()
            threads.append(thread)
        time.sleep(options.duration_s)
        writing.set()
        threads[0].join()
        end = run.now()
        target = current_lsn(run.dsn)
        config = load_config(pipeline)
        wait_until(lambda: slot_flushed_past(run.dsn, target, NAME), 900,
                   "the capture acknowledged everything")
        wait_until(lambda: groups_caught_up(config, TABLES, CONNECTORS), 900,
                   "the connectors caught up")
        result.catch_up_s = run.now() - end
        event_log = open_log(config.log)
        try:
            result.findings = check_all(run.dsn, event_log, config)
        finally:
            event_log.close()
        result.restarts = run.pipeline.runs - 1
        return result
    finally:
        run.stop.set()
        for thread in threads:
            thread.join(timeout=180)
        if run.probe is not None:
            run.probe.close()
        if run.pipeline is not None:
            run.pipeline.stop(timeout=30)
            options.out_dir.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                shutil.copy(run.pipeline.log_path, options.out_dir / "cdc-run.log")
        servers.stop()
        shutil.rmtree(workdir, ignore_errors=True)
