"""``python -m compose.demo [--duration S]``: start the servers, run the demo, stop all."""

from __future__ import annotations

import contextlib
import logging
import sys
import tempfile
import time
from pathlib import Path

import click
from rich.console import Console

from compose.launcher import services

from .runner import run_demo
from .spark_step import local_spark


@click.command()
@click.option("--duration", type=click.FloatRange(min=1), default=60.0, show_default=True,
              help="seconds of write workload")
def main(duration: float) -> None:
    """Run the demo end to end; exit 0 only when every copy equals PostgreSQL.

    Example: python -m compose.demo --duration 20
    """
    logging.basicConfig(level=logging.WARNING)
    console = Console(stderr=True)
    started = time.monotonic()
    try:
        with contextlib.ExitStack() as stack:
            console.print("[bold]demo[/]: starting PostgreSQL, Redis and OpenSearch")
            dsn = stack.enter_context(services.postgres_dsn())
            redis_url = stack.enter_context(services.redis_url())
            opensearch_url = stack.enter_context(services.opensearch_url())
            logs = Path(tempfile.mkdtemp(prefix="distributary-demo-logs-"))  # kept
            console.print(f"[bold]demo[/]: starting Spark (local[2]); its log: "
                          f"{logs / 'spark.log'}")
            spark_dir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            spark = stack.enter_context(local_spark(spark_dir, logs / "spark.log"))
            result = run_demo(dsn, redis_url, opensearch_url, duration=duration, spark=spark,
                              console=console, log_dir=logs)
    except KeyboardInterrupt:
        console.print("demo: interrupted; everything it started is stopped")
        sys.exit(130)
    console.print(f"[bold]demo[/]: took {time.monotonic() - started:.0f} s")
    if result.reconcile:
        print(result.reconcile, flush=True)
    print(result.line, flush=True)
    sys.exit(0 if not result.problems else 1)


if __name__ == "__main__":
    main()
