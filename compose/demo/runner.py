"""One demo run: schema, ``cdc run``, workload with a live view, Spark job, comparison."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession
from rich.console import Console
from rich.live import Live

from cdc.log.file import FileLog
from compose.launcher import free_port

from . import compare, resources, shop
from .cdc_process import CdcRun, cdc_run
from .display import DemoView, snapshot
from .pipeline_file import TOPIC_PREFIX, DemoServers, read_pipeline, write_pipeline
from .spark_step import (
    demo_aggregate,
    local_spark,
    orders_per_customer,
    read_output,
    run_spark_job,
)
from .workload import ShopWorkload


@dataclass
class DemoResult:
    """What the demo found: events in the log, and every difference (none: consistent)."""

    events: int = 0
    problems: list[str] = field(default_factory=list)
    reconcile: str = ""  # the summary line of ``cdc reconcile`` over the sinks

    @property
    def line(self) -> str:
        """The demo's last line."""
        if not self.problems:
            return f"demo: events={self.events} consistent=yes"
        return f"demo: events={self.events} consistent=no ({'; '.join(self.problems)})"


def run_demo(dsn: str, redis_url: str, opensearch_url: str, *, duration: float = 60.0,
             spark: SparkSession | None = None, console: Console | None = None,
             converge_timeout: float = 90.0, log_dir: Path | None = None) -> DemoResult:
    """Run the demo against these servers (a superuser DSN of a ``wal_level=logical``
    PostgreSQL); ``spark`` reuses a session, else a ``local[2]`` one is started.
    ``log_dir`` keeps ``cdc run``'s output (else it goes with the working directory)."""
    console = console or Console()
    name = f"demo_{uuid.uuid4().hex[:8]}"
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="distributary-")))
        stack.callback(resources.remove_cache_keys, redis_url, name)
        stack.callback(resources.remove_search_indices, opensearch_url, name)
        db = stack.enter_context(resources.demo_database(dsn, name))
        shop.create_schema(db)
        servers = DemoServers(db, redis_url, opensearch_url, name)
        metrics_port = free_port()
        config_path = write_pipeline(servers, workdir, metrics_port)
        console.print(f"[bold]demo[/]: database {name}, pipeline {config_path}")
        result = DemoResult()
        run_log = (log_dir or workdir) / "cdc-run.log"
        with cdc_run(config_path, run_log) as process:
            process.wait_streaming(db, name)
            console.print(f"[bold]demo[/]: status page http://127.0.0.1:{metrics_port}/ "
                          f"while the demo runs (cdc run's log: {run_log})")
            _drive(process, servers, config_path, duration, console)
            result.reconcile, result.problems = _reconcile(config_path, converge_timeout,
                                                           console)
            log_root = workdir / "log"
            result.events = sum(snapshot(FileLog(log_root).admin(), _topics(),
                                         []).events.values())
            if spark is None:
                spark = stack.enter_context(local_spark(workdir))
            result.problems += _spark_step(spark, log_root, workdir, config_path, db, console)
            code = process.stop()
            if code != 0:
                result.problems.append(f"cdc run exited with {code}: {process.log_tail(5)}")
        return result


def _spark_step(spark: SparkSession, log_root: Path, workdir: Path, config_path: Path,
                db: str, console: Console) -> list[str]:
    """The Spark job over the log, compared with PostgreSQL: the differences."""
    console.print("[bold]demo[/]: Spark job: materialize tables and orders per customer")
    written = run_spark_job(spark, log_root, TOPIC_PREFIX, workdir / "spark",
                            demo_aggregate(read_pipeline(config_path)))
    want = shop.read_postgres(db)
    tables, counts = read_output(spark, written)
    problems = []
    for table in shop.TABLES:
        problems += compare.diff_rows(f"spark {table.name}", want[table.name],
                                      tables[table.name])
    if counts != orders_per_customer(want["orders"]):
        problems.append("spark orders_per_customer differs from PostgreSQL")
    return problems


def _topics() -> list[str]:
    return [f"{TOPIC_PREFIX}.public.{table.name}" for table in shop.TABLES]


def _drive(process: CdcRun, servers: DemoServers, config_path: Path, duration: float,
           console: Console) -> None:
    """Run the workload in a thread and show the live view until it ends."""
    config = read_pipeline(config_path)
    assert config.log.path is not None
    admin = FileLog(config.log.path).admin()
    groups = [c.name for c in config.connectors]
    workload = ShopWorkload(servers.dsn)
    stop = threading.Event()
    failure: list[BaseException] = []

    def work() -> None:
        try:
            workload.run(duration, stop)
        except BaseException as exc:  # re-raised in the main thread
            failure.append(exc)

    thread = threading.Thread(target=work, name="workload")
    view = DemoView(duration)
    thread.start()
    try:
        with Live(view.update(snapshot(admin, _topics(), groups), 0), console=console,
                  refresh_per_second=2) as live:
            while thread.is_alive():
                thread.join(timeout=1.0)
                process.check_alive()
                live.update(view.update(snapshot(admin, _topics(), groups),
                                        workload.state.transactions))
    finally:
        stop.set()
        thread.join()
    if failure:
        raise failure[0]


def _reconcile(config_path: Path, timeout: float, console: Console) -> tuple[str, list[str]]:
    """``cdc reconcile`` over OpenSearch and Redis (it waits until the connectors have
    consumed what the workload wrote): its summary line, and its differences."""
    console.print("[bold]demo[/]: workload done; cdc reconcile: the sinks against PostgreSQL")
    done = subprocess.run([sys.executable, "-m", "cdc.cli", "reconcile", "-c",
                           str(config_path), "--timeout", str(timeout)],
                          capture_output=True, text=True, check=False)
    lines = done.stdout.splitlines()
    summary = next((line for line in lines if line.startswith("reconcile: tables=")), "")
    problems = [line for line in lines if line and not line.startswith("reconcile: ")]
    if done.returncode not in (0, 1) or not summary:
        problems.append(f"cdc reconcile exited with {done.returncode}: "
                        f"{done.stderr.strip()[-500:]}")
    return summary, problems
