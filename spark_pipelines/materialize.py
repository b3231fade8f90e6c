"""Materialize the current state of a table from its topic in the file log.

The newest event of each key wins, ordered by source position: the log line's top-level
``lsn`` (the commit LSN as an integer) and ``seq`` (the event's place in its
transaction), which is exactly the order of ``source.commit_lsn``/``source.seq`` without
parsing LSN text. Deletes remove the row; a truncate removes every row whose last event
came before it. A column PostgreSQL did not resend (a TOASTed value, listed in
``unchanged``) keeps its newest value sent before.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType, StructField, StructType

from .log_source import read_topic

POSITION_COLUMNS = ("_lsn", "_seq")
_UPSERTS = ("c", "u", "r")


def event_type(row_schema: StructType) -> StructType:
    """The part of an event the materialization reads, with ``after`` typed as a row."""
    return StructType([
        StructField("op", StringType()),
        StructField("after", row_schema),
        StructField("unchanged", ArrayType(StringType())),
    ])


def _after(lsn: Column, seq: Column, lsn_bound: Column, seq_bound: Column) -> Column:
    return (lsn > lsn_bound) | ((lsn == lsn_bound) & (seq > seq_bound))


def materialize_table(spark: SparkSession, log_root: Path | str, topic: str,
                      row_schema: StructType, *, as_of_lsn: int | None = None) -> DataFrame:
    """The rows of ``topic``'s table: one per live key, the columns of ``row_schema``
    (from each event's ``after``), plus ``_lsn`` and ``_seq``, the position of the event
    that last wrote the row.

    ``as_of_lsn`` keeps only events committed at or before that LSN (state as of it).
    Nothing is collected to the driver; the caller writes or inspects the DataFrame.
    """
    events = read_topic(spark, log_root, topic, event_type(row_schema)).select(
        "lsn", "seq", "key", F.col("value.op").alias("op"), F.col("value.after").alias("after"),
        F.coalesce(F.col("value.unchanged"), F.array().cast("array<string>"))
        .alias("unchanged"))
    if as_of_lsn is not None:
        events = events.where(F.col("lsn") <= F.lit(as_of_lsn))
    truncated = (events.where(F.col("op") == "t")
                 .agg(F.max(F.struct("lsn", "seq")).alias("t")))
    rows = events.where(F.col("op") != "t").crossJoin(truncated).where(
        F.col("t").isNull() | _after(F.col("lsn"), F.col("seq"), F.col("t.lsn"),
                                     F.col("t.seq")))
    upsert = F.col("op").isin(*_UPSERTS)
    columns = [
        F.max(F.when(upsert & ~F.array_contains("unchanged", name),
                     F.struct("lsn", "seq", F.col(f"after.{name}").alias("v"))))
        .alias(name)
        for name in row_schema.fieldNames()
    ]
    latest = rows.groupBy("key").agg(F.max(F.struct("lsn", "seq", "op")).alias("last"),
                                     *columns)
    return latest.where(F.col("last.op").isin(*_UPSERTS)).select(
        *[F.col(f"{name}.v").alias(name) for name in row_schema.fieldNames()],
        F.col("last.lsn").alias(POSITION_COLUMNS[0]), F.col("last.seq").alias(POSITION_COLUMNS[1]))
