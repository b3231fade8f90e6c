"""The ``aggregates`` job: derived datasets declared as Spark SQL (``spark.aggregates``)
over the materialized tables, each written as Parquet and checked by row count and
content checksum (``checksum``) read back from what was written.

Every materialized table is a temporary view named ``schema.table`` (write it in
backticks: ``FROM `public.orders```) and, when no other schema has a table of the same
name, plain ``table``. Output: ``<output>/aggregates/<name>`` (under ``as_of_<lsn>/``
for a state as of a commit LSN, beside the tables it was computed from).
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from cdc.config.models import AggregateConfig

from .checksum import spark_checksum
from .materialize import POSITION_COLUMNS
from .materialize_job import TableResult
from .state import ReplayError, TableHistory

AGGREGATES_DIR = "aggregates"
_WORD = re.compile(r"\w+")
_PLAN_LINE = re.compile(r"^\s*('|\+-|:|at |\|)")
_MESSAGE_LINES = 6
_DECLARATION_EXAMPLE = """spark:
  aggregates:
    - name: orders_per_customer
      sql: SELECT customer_id, count(*) AS orders FROM `public.orders` GROUP BY customer_id"""


class AggregateError(ReplayError):
    """An aggregate's query failed in Spark; the message names the aggregate."""


def select_aggregates(declared: Sequence[AggregateConfig], names: Sequence[str],
                      config_path: Path | str) -> list[AggregateConfig]:
    """The aggregates to run: those named (``--aggregate``), else every declared one."""
    if not declared:
        raise ReplayError(f"spark.aggregates: {config_path} declares none; add one, like\n"
                          + _DECLARATION_EXAMPLE)
    by_name = {aggregate.name: aggregate for aggregate in declared}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise ReplayError(f"--aggregate: {', '.join(unknown)} not in spark.aggregates of "
                          f"{config_path} (declared: {', '.join(by_name)})")
    return [by_name[name] for name in dict.fromkeys(names)] if names else list(declared)


def tables_read_by(aggregates: Sequence[AggregateConfig],
                   tables: Sequence[TableHistory]) -> list[TableHistory]:
    """The tables whose name occurs as a word in some aggregate's SQL (every table if
    none does: Spark's error then says which name it could not find)."""
    words = {word.lower() for aggregate in aggregates for word in _WORD.findall(aggregate.sql)}
    read = [t for t in tables if t.name.rsplit(".", 1)[-1].lower() in words]
    return read or list(tables)


def view_names(tables: Sequence[str]) -> dict[str, str]:
    """Temporary view name → ``schema.table``: the qualified name, plus the plain table
    name when only one schema has it."""
    plain = Counter(name.rsplit(".", 1)[-1] for name in tables)
    views = {name: name for name in tables}
    for name in tables:
        short = name.rsplit(".", 1)[-1]
        if plain[short] == 1 and short not in views:
            views[short] = name
    return views


def register_views(spark: SparkSession, frames: Mapping[str, DataFrame]) -> list[str]:
    """Register each ``schema.table`` → frame as temporary views; the names, sorted."""
    views = view_names(list(frames))
    for view, table in views.items():
        frames[table].createOrReplaceTempView("`" + view.replace("`", "``") + "`")
    return sorted(views)


def register_parquet_tables(spark: SparkSession, written: Mapping[str, Path]) -> list[str]:
    """Register materialized Parquet datasets (``schema.table`` → directory) as views,
    without the position columns."""
    return register_views(spark, {name: spark.read.parquet(str(path)).drop(*POSITION_COLUMNS)
                                  for name, path in written.items()})


def spark_message(exc: Exception) -> str:
    """Spark's own message, without the query plan and stack it may carry."""
    lines: list[str] = []
    for line in str(exc).strip().splitlines():
        if _PLAN_LINE.match(line) or len(lines) == _MESSAGE_LINES:
            break
        lines.append(line.rstrip())
    return "\n".join(lines).rstrip(";").strip() or type(exc).__name__


@contextmanager
def _quiet_query_logger() -> Iterator[None]:
    """PySpark logs a failed query's error itself; the job reports it once, named."""
    logger = logging.getLogger("SQLQueryContextLogger")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def run_aggregate(spark: SparkSession, aggregate: AggregateConfig, output: Path,
                  views: Sequence[str] = ()) -> TableResult:
    """Run one aggregate's SQL over the registered views, write ``output/aggregates/
    <name>`` as Parquet and check it; a Spark error becomes an ``AggregateError``."""
    started = time.perf_counter()
    target = output / AGGREGATES_DIR / aggregate.name
    try:
        with _quiet_query_logger():
            spark.sql(aggregate.sql).write.mode("overwrite").parquet(str(target))
    except (PySparkException, Py4JJavaError) as exc:
        listed = ", ".join(f"`{view}`" for view in views)
        known = f"\n(views: {listed}; write schema.table in backticks)" if views else ""
        raise AggregateError(f"spark.aggregates: {aggregate.name!r} failed in Spark: "
                             f"{spark_message(exc)}{known}") from None
    rows, checksum = spark_checksum(spark.read.parquet(str(target)))
    return TableResult(aggregate.name, rows, checksum, target, time.perf_counter() - started)


def run_aggregates(spark: SparkSession, aggregates: Sequence[AggregateConfig],
                   written: Mapping[str, Path], output: Path) -> list[TableResult]:
    """Register the materialized tables, then run and check each aggregate."""
    views = register_parquet_tables(spark, written)
    return [run_aggregate(spark, aggregate, output, views) for aggregate in aggregates]
