"""The demo's Spark job: materialize each shop table from the log, plus the aggregate
``orders_per_customer`` that ``compose/pipeline.yaml`` declares (``spark.aggregates``,
run by the ``cdc replay aggregates`` code), as Parquet; then read the output back for
the comparison."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from cdc.config import PipelineConfig
from cdc.config.models import AggregateConfig
from spark_pipelines.aggregates import register_parquet_tables, run_aggregate
from spark_pipelines.materialize import materialize_table

from . import shop

AGGREGATE = "orders_per_customer"


def spark_schema(table: sa.Table) -> StructType:
    """``table``'s rows as events carry them: integers as longs, numeric and timestamps
    as their exact text."""
    return StructType([StructField(c.name, LongType() if isinstance(c.type, sa.Integer)
                                   else StringType()) for c in table.columns])


@contextmanager
def output_to(log_path: Path) -> Iterator[None]:
    """While the block runs, this process's standard error (file descriptor 2) goes to
    ``log_path``: a child started meanwhile (Spark's JVM) keeps writing there for good,
    and the demo's own output is back on the terminal after the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with log_path.open("ab") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@contextmanager
def local_spark(workdir: Path, log_path: Path | None = None) -> Iterator[SparkSession]:
    """A small ``local[2]`` session for the demo, stopped afterwards; its JVM writes its
    warnings and logs to ``log_path`` (when given) instead of the terminal."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no "hostname resolves to" WARN
    with contextlib.ExitStack() as quiet:
        if log_path is not None:
            quiet.enter_context(output_to(log_path))
        session = _demo_session(workdir)
    try:
        yield session
    finally:
        session.stop()


def _demo_session(workdir: Path) -> SparkSession:
    session = (SparkSession.builder.master("local[2]").appName("distributary-demo")
               .config("spark.driver.memory", "512m")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.local.dir", str(workdir / "spark-tmp"))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


def demo_aggregate(config: PipelineConfig) -> AggregateConfig:
    """The aggregate the demo checks, as the pipeline file declares it."""
    for aggregate in config.spark.aggregates:
        if aggregate.name == AGGREGATE:
            return aggregate
    raise ValueError(f"spark.aggregates: the demo needs one named {AGGREGATE!r} "
                     "(see compose/pipeline.yaml)")


def run_spark_job(spark: SparkSession, log_root: Path, topic_prefix: str,
                  output: Path, aggregate: AggregateConfig) -> dict[str, Path]:
    """Write ``<output>/<table>`` for every shop table and ``<output>/aggregates/<name>``
    for ``aggregate`` (over the tables as views ``public.<table>`` and ``<table>``)."""
    written: dict[str, Path] = {}
    for table in shop.TABLES:
        frame = materialize_table(spark, log_root, f"{topic_prefix}.public.{table.name}",
                                  spark_schema(table))
        written[table.name] = output / table.name
        frame.write.mode("overwrite").parquet(str(written[table.name]))
    views = register_parquet_tables(spark, {f"public.{table.name}": written[table.name]
                                            for table in shop.TABLES})
    written[AGGREGATE] = Path(run_aggregate(spark, aggregate, output, views).path)
    return written


def read_output(spark: SparkSession, written: dict[str, Path]
                ) -> tuple[dict[str, dict[str, shop.Row]], dict[int, int]]:
    """The materialized tables (normalized, by key) and the aggregate from the Parquet."""
    tables = {}
    for table in shop.TABLES:
        rows = spark.read.parquet(str(written[table.name])).collect()
        tables[table.name] = {shop.key_of(table, r.asDict()): shop.normalize(table, r.asDict())
                              for r in rows}
    counts: dict[int, int] = {int(r["customer_id"]): int(r["orders"])
                              for r in spark.read.parquet(str(written[AGGREGATE])).collect()}
    return tables, counts


def orders_per_customer(rows: dict[str, shop.Row]) -> dict[int, int]:
    """The aggregate computed from PostgreSQL's orders, to check Spark's."""
    counts: dict[int, int] = {}
    for row in rows.values():
        customer: Any = row["customer_id"]
        counts[int(customer)] = counts.get(int(customer), 0) + 1
    return counts
