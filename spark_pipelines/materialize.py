"""Materialize the current state of a table from its topic.

The newest event of each key wins, ordered by source position: the record's ``lsn``
(the commit LSN as an integer) and ``seq`` (the event's place in its transaction),
exactly the order of ``source.commit_lsn``/``source.seq`` without parsing LSN text.
Deletes remove the row; a truncate removes every row whose last event came before it
(snapshot ``r`` events are upserts like ``c`` and ``u``, so they merge with streamed
ones by position). A column PostgreSQL did not resend (a TOASTed value, listed in
``unchanged``) keeps its newest value sent before: step 1 of ``derived.toast``'s rule, in
Spark SQL here (a column nothing sent is null; ``before`` is not read), held to
``derived.fill_unchanged`` by the cases of ``tests/unit/derived/toast_cases.py``; after a
key change, the value the old key had (``_before_key_change``).

Everything is Spark SQL (no Python per record): one aggregation per key over the events
(``max_by`` the position; Spark runs it as a sort aggregation, the buffer holding the
row's strings — a hash aggregation of the newest position joined back to the events
measured only 7 % faster: docs/performance.md — grouped by the key's hash, then the key,
so that the sort mostly compares numbers), then, only for
the rare keys whose newest event left columns out, a second look at their history.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from .log_source import read_topic

POSITION_COLUMNS = ("_lsn", "_seq")
KEY_COLUMN = "_key"
OP_COLUMN = "_op"
VERSION_COLUMN = "_schema_version"
UPSERTS = ("c", "u", "r")
TRUNCATE_KEY = "{}"


def event_type(row_schema: StructType) -> StructType:
    """The part of an event the materialization reads, with ``after`` typed as a row."""
    return StructType([
        StructField("op", StringType()),
        StructField("after", row_schema),
        StructField("unchanged", ArrayType(StringType())),
        StructField("schema_version", LongType()),
    ])


def _newer(lsn: Column, seq: Column, lsn_bound: Column, seq_bound: Column) -> Column:
    return (lsn > lsn_bound) | ((lsn == lsn_bound) & (seq > seq_bound))


def current_state(records: DataFrame, names: Sequence[str], *, as_of_lsn: int | None = None,
                  with_deletes: bool = False) -> DataFrame:
    """One row per live key from ``records`` (``lsn``, ``seq``, ``key`` and ``value`` as
    ``event_type`` gives it): the columns ``names``, plus ``_lsn``/``_seq`` (the position
    of the event that last wrote the row), ``_key`` (the key's JSON text), ``_op`` and
    ``_schema_version`` (of that event).

    ``with_deletes`` also keeps keys whose last event is a delete (``_op`` ``d``, columns
    null) and the last truncate itself (``_op`` ``t``), for rebuilds that replay them
    through a sink's version guard.

    ``as_of_lsn`` keeps only events committed at or before that LSN. The per-key
    aggregation is persisted (memory, then disk) for the jobs that read the state more
    than once, and so are the events when a row's newest event left columns out (their
    history is read again): ``spark.catalog.clearCache()`` releases both.
    """
    events = records.select(
        "lsn", "seq", "key", F.col("value.op").alias("op"), F.col("value.after").alias("after"),
        F.coalesce(F.col("value.unchanged"), F.array().cast("array<string>")).alias("unchanged"),
        F.col("value.schema_version").alias("schema_version"))
    if as_of_lsn is not None:
        events = events.where(F.col("lsn") <= F.lit(as_of_lsn))
    # grouped by the key's hash first: Spark sorts the events by the grouping columns, and
    # keys' JSON texts share their first bytes ({"id":…), the prefix its sort compares
    # first, so every comparison would go on to the whole strings (20 % less time with the hash)
    latest = (events.groupBy(F.xxhash64("key").alias("_key_hash"), "key")
              .agg(F.max_by(F.struct("lsn", "seq", "op", "schema_version", "after", "unchanged"),
                            F.struct("lsn", "seq")).alias("last"))
              .drop("_key_hash")
              .persist(StorageLevel.MEMORY_AND_DISK))
    truncated = (latest.where((F.col("key") == TRUNCATE_KEY) & (F.col("last.op") == "t"))
                 .select(F.col("last.lsn").alias("t_lsn"), F.col("last.seq").alias("t_seq")))
    kept = (*UPSERTS, "d") if with_deletes else UPSERTS
    live = latest.where(F.col("last.op").isin(*kept)).join(truncated, F.lit(True), "left_outer")
    rows = live.where(F.col("t_lsn").isNull() | _newer(
        F.col("last.lsn"), F.col("last.seq"), F.col("t_lsn"), F.col("t_seq")))
    if with_deletes:
        rows = rows.unionByName(latest.where(F.col("last.op") == "t").join(
            truncated, F.lit(True), "left_outer"))
    return _with_toast_filled(events, rows, names)


def _with_toast_filled(events: DataFrame, rows: DataFrame, names: Sequence[str]) -> DataFrame:
    position = [F.col("last.lsn").alias(POSITION_COLUMNS[0]),
                F.col("last.seq").alias(POSITION_COLUMNS[1]), F.col("key").alias(KEY_COLUMN),
                F.col("last.op").alias(OP_COLUMN),
                F.col("last.schema_version").alias(VERSION_COLUMN)]
    partial = rows.where(F.size("last.unchanged") > 0)
    if partial.limit(1).count() == 0:
        return rows.select(*[_last_after(n).alias(n) for n in names], *position)
    upsert = F.col("op").isin(*UPSERTS)
    # read three times more below (the keys' history, the key changes' deletes and old
    # keys): once from the log, then from the cache (a Kafka scan is a stage per read)
    events = events.persist(StorageLevel.MEMORY_AND_DISK)
    history = events.join(partial.select("key"), "key", "left_semi")
    history = history.unionByName(_before_key_change(events, history))
    earlier = history.groupBy("key").agg(*[
        F.max(F.when(upsert & ~F.array_contains("unchanged", name),
                     F.struct("lsn", "seq", F.col("after").getField(name).alias("v"))))
        .alias(f"_f_{i}") for i, name in enumerate(names)])
    joined = rows.join(earlier, "key", "left_outer")
    return joined.select(*[
        F.when(F.array_contains("last.unchanged", name), F.col(f"_f_{i}.v"))
        .otherwise(_last_after(name)).alias(name) for i, name in enumerate(names)], *position)


def _last_after(name: str) -> Column:
    """A column of the newest event's row (by field: a name may hold dots or spaces)."""
    return F.col("last.after").getField(name)


def _before_key_change(events: DataFrame, history: DataFrame) -> DataFrame:
    """The events of the old keys of key changes in ``history``, under the new key.

    PostgreSQL sends a key-changing update as a delete of the old key and, at the next
    position of the transaction, an insert of the new one that leaves unchanged TOAST
    columns out: their values are the old key's (one change deep: a new key whose own
    insert left columns out again takes nothing from the key before its old one).
    """
    inserts = (history.where((F.col("op") == "c") & (F.size("unchanged") > 0))
               .select(F.col("key").alias("new_key"), "lsn", (F.col("seq") - 1).alias("seq")))
    deletes = events.where(F.col("op") == "d").select(F.col("key").alias("old_key"), "lsn", "seq")
    moves = inserts.join(deletes, ["lsn", "seq"]).select(
        "new_key", "old_key", F.col("lsn").alias("m_lsn"), F.col("seq").alias("m_seq"))
    inherited = events.join(moves, events["key"] == moves["old_key"]).where(
        _newer(F.col("m_lsn"), F.col("m_seq"), F.col("lsn"), F.col("seq")))
    return inherited.select(F.col("new_key").alias("key"), "lsn", "seq", "op", "after",
                            "unchanged", "schema_version")


def materialize_table(spark: SparkSession, log_root: Path | str, topic: str,
                      row_schema: StructType, *, as_of_lsn: int | None = None) -> DataFrame:
    """The rows of ``topic``'s table in a file log: the columns of ``row_schema`` (read
    from each event's ``after`` with those types) plus ``_lsn`` and ``_seq``.

    ``as_of_lsn`` keeps only events committed at or before that LSN (state as of it).
    """
    records = read_topic(spark, log_root, topic, event_type(row_schema))
    state = current_state(records, row_schema.fieldNames(), as_of_lsn=as_of_lsn)
    return state.drop(KEY_COLUMN, OP_COLUMN, VERSION_COLUMN)
