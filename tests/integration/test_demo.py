"""A short ``make demo`` against the test servers ends with ``consistent=yes``."""

from __future__ import annotations

import io

from pyspark.sql import SparkSession
from rich.console import Console

from compose.demo import run_demo


def test_short_demo_is_consistent(postgres_dsn: str, redis_url: str, opensearch_url: str,
                                  spark: SparkSession) -> None:
    output = io.StringIO()
    result = run_demo(postgres_dsn, redis_url, opensearch_url, duration=8, spark=spark,
                      console=Console(file=output, width=100))
    assert result.line.endswith("consistent=yes"), result.line
    assert result.reconcile.endswith(" missing=0 extra=0 different=0"), result.reconcile
    assert result.reconcile.startswith("reconcile: tables=3 rows="), result.reconcile
    assert result.events > 100, result.line
    assert "distributary.public.orders" in output.getvalue(), "the live view showed topics"
