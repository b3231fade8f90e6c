"""A Delta Lake table per captured table: ``cdc replay materialize --format delta``.

Delta rather than Iceberg: a Delta table is a directory (no catalog service to run beside
it), a commit carries free-form metadata atomically with its data (the log position the
table reached is written in the same commit as the rows), MERGE upserts by key, and
readers without Spark are mature (``deltalake``, a Rust library with no JVM; DuckDB's
``delta`` extension; Trino).

The first run writes each table's state (the newest columns with their types, then
``_lsn``/``_seq``, the position of the row's last event, ``_key``, the key's JSON text,
and ``_hash``, the row's 60-bit hash: the run's checksum sums that one column rather than
every value of a table an update barely touched). Every later run reads only the log's
records from the offsets the newest commit names up to the log's end now, takes each
key's newest event among them and MERGEs those into the table (deletes delete; an upsert
writes only over an older position, so a run repeated after a crash changes nothing), in
one commit whose metadata names the new offsets. A kill at any point leaves the
table at its last commit, which the next run goes on from. Time travel is Delta's:
``versionAsOf``/``timestampAsOf``; each commit's metadata names the newest commit LSN it
holds (``versions``).

A table with a column name Delta does not take as it is (a space, a comma, ``;{}()=``, a
tab or a newline: PostgreSQL takes any) gets Delta's column mapping (``name`` mode), which
readers must support: ``deltalake``'s ``QueryBuilder`` does, its ``to_pyarrow_table`` (1.6)
reads such a table's values as nulls.

The table is written whole again, in one commit too, when an update could not be exact:
the new events hold a truncate or leave TOASTed columns out (their values are in the
table, not in the new events), the table's schema version or column types changed, or
the metadata is missing or names other partitions or offsets past the log's end (a log
recreated), or retention removed records past the offsets the table reached (the table is
then what the retained log holds, as a Parquet ``materialize`` would be).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.capture.lsn import format_lsn
from cdc.crashpoints import crash_point

from .checksum import hash_checksum, row_hash
from .columns import quoted
from .kafka_packages import with_package
from .materialize import (
    KEY_COLUMN,
    OP_COLUMN,
    POSITION_COLUMNS,
    UPSERTS,
    current_state,
    event_type,
)
from .materialize_job import TableResult
from .source import EndOffsets, LogSource
from .state import TableHistory, text_row, text_state
from .typed import typed_state

DELTA_PACKAGE = "io.delta:delta-spark_2.13:4.0.0"
_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
HASH_COLUMN = "_hash"  # the row's hash: the table's checksum reads this column alone
_POSITIONED = (*POSITION_COLUMNS, KEY_COLUMN)
# no deletion vectors: ``deltalake``'s ``to_pyarrow_table`` (1.6) refuses tables with them,
# and they did not make the MERGE faster (2026-12-01, Delta 4.0, 100 k random keys of 1 M:
# its two joins of the new rows with the table cost more than rewriting the files did)
_TABLE_PROPERTIES = {"delta.enableDeletionVectors": "false"}
# characters Delta refuses in a column name unless the table maps names to physical ones
# (column mapping, then on: readers need to support it)
_NOT_IN_PLAIN_NAMES = frozenset(" ,;{}()\n\t=")


def with_delta(conf: Mapping[str, object]) -> dict[str, object]:
    """``conf`` plus Delta Lake: its package, SQL extension and catalog (set when the
    session starts; a pipeline's own ``spark.sql.extensions`` are kept)."""
    settings = with_package(conf, DELTA_PACKAGE, "delta-spark")
    extensions = [e.strip() for e in str(settings.get("spark.sql.extensions", "")).split(",")
                  if e.strip()]
    if _EXTENSION not in extensions:
        settings["spark.sql.extensions"] = ",".join([*extensions, _EXTENSION])
    settings.setdefault("spark.sql.catalog.spark_catalog", _CATALOG)
    return settings


@dataclass(frozen=True, slots=True)
class LogPosition:
    """What a commit of the table holds: the topic's records below ``ends``; ``lsn``, the
    newest commit LSN among them; ``schema_version``, the table's newest then."""

    topic: str
    ends: dict[int, int]
    lsn: int
    schema_version: int

    def to_json(self) -> str:
        return orjson.dumps({"distributary": {
            "topic": self.topic, "ends": {str(p): e for p, e in sorted(self.ends.items())},
            "lsn": self.lsn, "schema_version": self.schema_version}}).decode()

    @classmethod
    def from_json(cls, text: str | None) -> LogPosition | None:
        """The position in a commit's metadata; None if it holds none of ours."""
        try:
            found = orjson.loads(text or "")["distributary"]
            return cls(str(found["topic"]), {int(p): int(e) for p, e in found["ends"].items()},
                       int(found["lsn"]), int(found["schema_version"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            return None


@dataclass(frozen=True, slots=True)
class Version:
    """One commit of a table: its Delta version, time and the log position it reached."""

    version: int
    timestamp: str
    position: LogPosition | None


def versions(spark: SparkSession, target: Path | str, limit: int | None = None
             ) -> list[Version]:
    """The commits of the table at ``target`` (the newest ``limit``, else every one Delta
    keeps), newest first; empty: no table there."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, str(target)):
        return []
    history = DeltaTable.forPath(spark, str(target)).history(limit)
    return [Version(int(row["version"]), str(row["timestamp"]),
                    LogPosition.from_json(row["userMetadata"]))
            for row in history.select("version", "timestamp", "userMetadata").collect()]


def version_at(known: list[Version], lsn: int) -> Version | None:
    """The newest of ``known`` whose log position is at or before ``lsn`` (it holds the
    state as of its own LSN: changes after it, up to ``lsn``, are in later versions)."""
    at_or_before = [v for v in known if v.position is not None and v.position.lsn <= lsn]
    return max(at_or_before, key=lambda v: v.version, default=None)


def describe_version(version: Version) -> str:
    """One line about a commit: its version, the LSN and offsets it reached, its time."""
    position = version.position
    reached = (f"lsn={format_lsn(position.lsn)} offsets={_offsets(position.ends)}"
               if position is not None else "lsn=unknown (a commit of another writer)")
    return f"version={version.version} {reached} committed={version.timestamp}"


def update_lakehouse(spark: SparkSession, source: LogSource, history: TableHistory,
                     target: Path) -> TableResult:
    """Bring the Delta table at ``target`` up to the log's end (see the module docstring);
    the result's warnings say how (``written whole``, ``updated``, ``unchanged``)."""
    started = time.perf_counter()
    topic = source.topic(history.name)
    ranges = source.offset_ranges(topic)
    ends = {partition: end for partition, (_, end) in ranges.items()}
    known = versions(spark, target, limit=1)  # not a long-lived table's whole history
    last = known[0].position if known else None
    reason = why_write_whole(last, topic, ranges, history)
    warnings: list[str] = []
    if reason is None and last is not None and last.ends == ends:
        how = f"unchanged at version {known[0].version}"
    elif reason is None and last is not None:
        reason, kept = _merge(spark, source, history, target, last, ends)
        how = f"updated from offsets {_offsets(last.ends)} to {_offsets(ends)}"
        warnings += kept
    if reason is not None:
        warnings += _write_whole(spark, source, history, target, ends)
        how = f"written whole ({reason})"
    rows, checksum = hash_checksum(spark.read.format("delta").load(str(target)), HASH_COLUMN)
    spark.catalog.clearCache()
    return TableResult(history.name, rows, checksum, target, time.perf_counter() - started,
                       [*warnings, f"{history.name}: {how}"])


def why_write_whole(last: LogPosition | None, topic: str,
                    ranges: Mapping[int, tuple[int, int]],
                    history: TableHistory) -> str | None:
    """Why the table must be written whole rather than updated from ``last`` (its newest
    commit's position), given the topic's retained offset ``ranges``; None: it need not."""
    if last is None:
        return "no Delta table written by Distributary there yet"
    if last.topic != topic:
        return f"the table was written from topic {last.topic}"
    if last.schema_version != history.newest.version:
        return (f"schema version {history.newest.version} since version "
                f"{last.schema_version}")
    if any(p not in ranges or ranges[p][1] < e for p, e in last.ends.items()):
        return "the log ends before the offsets the table reached (a new log?)"
    gone = [f"partition {p} from {e} to {ranges[p][0]}" for p, e in sorted(last.ends.items())
            if ranges[p][0] > e]
    if gone:
        return ("retention removed records the table had not taken yet: "
                + ", ".join(gone))
    return None


def _offsets(ends: EndOffsets) -> str:
    return ",".join(f"{p}:{e}" for p, e in sorted(ends.items()))


def _write_whole(spark: SparkSession, source: LogSource, history: TableHistory,
                 target: Path, ends: EndOffsets) -> list[str]:
    state = text_state(spark, source, history, ends, with_deletes=True).persist(
        StorageLevel.MEMORY_AND_DISK)  # computed once: checked, its newest LSN, written
    typed, kept = typed_state(state, history.newest, (*_POSITIONED, OP_COLUMN))
    typed = _hashed(typed)
    lsn = _newest_lsn(typed, 0)
    position = LogPosition(source.topic(history.name), dict(ends), lsn, history.newest.version)
    writer = (typed.where(F.col(OP_COLUMN).isin(*UPSERTS)).drop(OP_COLUMN)
              .write.format("delta").mode("overwrite").option("overwriteSchema", "true")
              .option("userMetadata", position.to_json()))
    for key, value in _TABLE_PROPERTIES.items():
        writer = writer.option(key, value)
    if any(set(name) & _NOT_IN_PLAIN_NAMES for name in typed.columns):
        writer = writer.option("delta.columnMapping.mode", "name")
        _map_column_names(spark, target)
    writer.save(str(target))
    return [k.warning(history.name) for k in kept]


def _map_column_names(spark: SparkSession, target: Path) -> None:
    """Turn column mapping on for an existing table without it (its own commit, before
    the table is written whole: a write's options only apply to a new table)."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, str(target)):
        return
    detail = DeltaTable.forPath(spark, str(target)).detail().first()
    if detail is not None and detail["properties"].get("delta.columnMapping.mode") == "name":
        return
    # an identifier (the path in backticks, escaped), not a value: no parameter for it
    spark.sql(f"ALTER TABLE delta.{quoted(str(target))} SET TBLPROPERTIES "
              "('delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', "
              "'delta.minWriterVersion' = '5')")


def _merge(spark: SparkSession, source: LogSource, history: TableHistory, target: Path,
           last: LogPosition, ends: EndOffsets) -> tuple[str | None, list[str]]:
    """MERGE the newest event of each key since ``last``; a reason to write the table
    whole instead (nothing written then), and the columns kept as text."""
    from delta.tables import DeltaTable

    topic = source.topic(history.name)
    row = text_row(history)
    records = source.read(spark, topic, event_type(row), ends, last.ends).persist(
        StorageLevel.MEMORY_AND_DISK)  # the new events only: read once, looked at twice
    inexact = (F.col("value.op") == "t") | (F.size(F.coalesce(
        F.col("value.unchanged"), F.array().cast("array<string>"))) > 0)
    found = records.agg(F.count(F.when(inexact, 1)).alias("inexact"),
                        F.max("lsn").alias("newest")).collect()[0]  # one pass for both
    if found["inexact"]:
        return "the new events hold a truncate or leave TOASTed columns out", []
    state = current_state(records, row.fieldNames(), with_deletes=True)
    typed, kept = typed_state(state, history.newest, (*_POSITIONED, OP_COLUMN))
    typed = _hashed(typed)
    table = DeltaTable.forPath(spark, str(target))
    stored = table.toDF().schema
    if HASH_COLUMN not in stored.fieldNames():
        return f"the table has no {HASH_COLUMN} column (written by an earlier version)", []
    if [(f.name, f.dataType) for f in stored] != [
            (f.name, f.dataType) for f in typed.drop(OP_COLUMN).schema]:
        return "a column's type changed (a value no longer fits it)", []
    position = LogPosition(topic, dict(ends), max(last.lsn, int(found["newest"] or 0)),
                           history.newest.version)
    columns: dict[str, str | Column] = {
        quoted(name): F.col(f"s.{quoted(name)}") for name in stored.fieldNames()}
    newer = ((F.col("s._lsn") > F.col("t._lsn"))
             | ((F.col("s._lsn") == F.col("t._lsn")) & (F.col("s._seq") > F.col("t._seq"))))
    deleted = F.col(f"s.{OP_COLUMN}") == "d"
    crash_point("lakehouse.before_merge")
    with _commit_metadata(spark, position.to_json()):
        (table.alias("t").merge(typed.alias("s"), F.col("t._key") == F.col("s._key"))
         .whenMatchedDelete(condition=deleted & newer)
         .whenMatchedUpdate(condition=~deleted & newer, set=columns)
         .whenNotMatchedInsert(condition=~deleted, values=columns)
         .execute())
    crash_point("lakehouse.after_merge")
    return None, [k.warning(history.name) for k in kept]


def _hashed(typed: DataFrame) -> DataFrame:
    """``typed`` with each row's hash of its table's columns (``_hash``) after ``_key``."""
    values = [quoted(name) for name in typed.columns
              if name not in (*_POSITIONED, OP_COLUMN)]
    return typed.select(*values, *_POSITIONED,
                        row_hash(typed.select(*values).schema).alias(HASH_COLUMN), OP_COLUMN)


def _newest_lsn(state: DataFrame, floor: int) -> int:
    found = state.agg(F.max(POSITION_COLUMNS[0])).collect()[0][0]
    return max(floor, int(found or 0))


@contextmanager
def _commit_metadata(spark: SparkSession, text: str) -> Iterator[None]:
    """Delta writes the session's ``userMetadata`` into the commits made meanwhile."""
    spark.conf.set(_USER_METADATA, text)
    try:
        yield
    finally:
        spark.conf.unset(_USER_METADATA)


def update_lakehouses(spark: SparkSession, source: LogSource, tables: list[TableHistory],
                      output: Path) -> list[TableResult]:
    """``update_lakehouse`` for each table, at ``output/<schema.table>``."""
    return [update_lakehouse(spark, source, history, output / history.name)
            for history in tables]
