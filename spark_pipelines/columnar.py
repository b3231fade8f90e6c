"""The file log read through its columnar companions (``companions``): Parquet for every
sealed segment that has a companion matching it, the segments' JSON lines for the rest
(the tail a writer still appends to, and any segment not converted yet), with the same
columns and the same values either way.

A companion keeps each event the way the jobs read it: ``before``/``after`` as one text
column per table column (the value's JSON text, exactly as Spark's JSON reader gives a
string field: numerics keep every digit, a timestamp beyond Spark's range or a value kept
as ``unparsed`` text stays the event's text), ``unchanged``/``unparsed`` as lists,
``schema_version`` as a number and ``source`` as text fields. It is written by Spark's own
JSON reader from the segment, so what a job reads from it is what it would have parsed.
Typing a column is the job's step (``typed``), after the state is computed.

A job asks for the part of the event it reads (a ``DataType`` of the value); that part is
taken from the companion's columns (``conformed``): a table column the companion lacks is
``NULL`` (no event of that segment has it), a JSON-text field asked as a structure is
parsed. A request the companion cannot answer exactly — a field it does not keep — reads
the whole topic as JSON instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    AtomicType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from cdc.log.file import topic_dir

from .companions import check_companion, companion_paths, partition_segments, sealed, segment_path
from .log_source import RECORD_COLUMNS, record_columns, record_schema

log = logging.getLogger(__name__)

ROW_FIELDS = frozenset({"before", "after"})
SOURCE_FIELDS = ("db", "schema", "table", "lsn", "commit_lsn", "seq", "txid", "commit_ts",
                 "snapshot")


def companion_value_type(columns: Sequence[str]) -> StructType:
    """The event as a companion stores it, for a topic whose rows have ``columns``."""
    row = StructType([StructField(name, StringType()) for name in columns])
    return StructType([
        StructField("op", StringType()), StructField("key", StringType()),
        StructField("before", row), StructField("after", row),
        StructField("unchanged", ArrayType(StringType())),
        StructField("unparsed", ArrayType(StringType())),
        StructField("truncate", StringType()), StructField("message", StringType()),
        StructField("schema_version", LongType()),
        StructField("source", StructType([StructField(n, StringType())
                                          for n in SOURCE_FIELDS]))])


def conformed(column: Column, stored: DataType, wanted: DataType, *,
              open_row: bool = False) -> Column | None:
    """``column`` (stored as ``stored``) as ``wanted``, or ``None`` when the stored form
    cannot give it exactly. ``open_row``: a struct of table columns, where a column not
    stored is ``NULL``."""
    if stored == wanted:
        return column
    if isinstance(stored, StructType) and isinstance(wanted, StructType):
        have = {f.name: f.dataType for f in stored.fields}
        fields = []
        for field in wanted.fields:
            if field.name in have:
                part = conformed(column.getField(field.name), have[field.name],
                                 field.dataType,
                                 open_row=not open_row and field.name in ROW_FIELDS)
            elif open_row:
                part = F.lit(None).cast(field.dataType)
            else:
                return None
            if part is None:
                return None
            fields.append(part.alias(field.name))
        return F.when(column.isNull(), F.lit(None).cast(wanted)).otherwise(F.struct(*fields))
    if isinstance(stored, StringType):
        if isinstance(wanted, StructType | ArrayType):
            return F.from_json(column, wanted, {"mode": "FAILFAST"})
        if isinstance(wanted, AtomicType):
            return column.cast(wanted)
    return None


def readable_as(stored: DataType, wanted: DataType, *, open_row: bool = False) -> bool:
    """Whether Parquet's reader gives ``wanted`` straight from ``stored`` columns: the
    same types, fields left out, table columns a companion lacks read as ``NULL`` — no
    expression per row."""
    if stored == wanted:
        return True
    if not (isinstance(stored, StructType) and isinstance(wanted, StructType)):
        return False
    have = {f.name: f.dataType for f in stored.fields}
    return all(
        readable_as(have[f.name], f.dataType,
                    open_row=not open_row and f.name in ROW_FIELDS) if f.name in have
        else open_row for f in wanted.fields)


def row_names(value_type: DataType) -> set[str]:
    """The table columns a request reads (the fields of its ``before``/``after``)."""
    if not isinstance(value_type, StructType):
        return set()
    return {name for f in value_type.fields if f.name in ROW_FIELDS
            and isinstance(f.dataType, StructType) for name in f.dataType.fieldNames()}


def case_clashes(columns: Iterable[str]) -> list[str]:
    """Column names equal to another one but for case (``a/A``), each pair once."""
    seen: dict[str, str] = {}
    clashes = []
    for name in dict.fromkeys(columns):
        other = seen.setdefault(name.lower(), name)
        if other != name:
            clashes.append(f"{other}/{name}")
    return clashes


@dataclass(frozen=True, slots=True)
class Plan:
    """Which files of a topic a read takes: companions (with the segment each stands for)
    and JSON segments."""

    companions: list[tuple[Path, Path]]  # (companion, its segment)
    segments: list[Path]
    columns: tuple[str, ...]  # every row column the chosen companions hold


def plan(log_root: Path | str, topic: str, ends: Mapping[int, int],
         starts: Mapping[int, int] | None = None) -> Plan:
    """The files holding the records of ``topic`` below ``ends`` (and, with ``starts``, not
    only records below those offsets): each sealed segment's companion when it matches the
    segment (a damaged one is logged and passed over), the segment itself otherwise."""
    companions: list[tuple[Path, Path]] = []
    segments: list[Path] = []
    columns: dict[str, None] = {}
    for partition, end in sorted(ends.items()):
        bases = partition_segments(log_root, topic, partition)
        closed = set(sealed(bases))
        start = 0 if starts is None else starts.get(partition, 0)
        for base, following in zip_longest(bases, bases[1:]):  # the next base, or None
            if base >= end:
                break
            if following is not None and following <= start:
                continue  # every record of the segment is below the start
            segment = segment_path(log_root, topic, partition, base)
            verdict = check_companion(log_root, topic, partition, base) if base in closed \
                else None
            if verdict is not None and verdict.usable and verdict.manifest is not None:
                companion = companion_paths(log_root, topic, partition, base)[0]
                companions.append((companion, segment))
                columns.update(dict.fromkeys(verdict.manifest.columns))
                continue
            if verdict is not None and verdict.problem != "missing":
                log.warning("not reading the columnar companion of %s partition %d segment "
                            "%d: %s; reading the segment's JSON instead (cdc log columnar "
                            "writes it again)", topic, partition, base, verdict.problem)
            segments.append(segment)
    return Plan(companions, segments, tuple(columns))


def read_records(spark: SparkSession, log_root: Path | str, topic: str, value_type: DataType,
                 ends: Mapping[int, int], starts: Mapping[int, int] | None = None
                 ) -> DataFrame:
    """The records of ``topic`` (``RECORD_COLUMNS``, ``value`` as ``value_type``), from
    companions where they match and from JSON elsewhere; only partitions of ``ends`` and,
    in each, at least the records from its start below its end (the caller bounds the
    offsets)."""
    chosen = plan(log_root, topic, ends, starts)
    if not chosen.companions and not chosen.segments:  # retention removed every segment
        return spark.createDataFrame([], record_columns(value_type))
    base_path = str(topic_dir(log_root, topic))
    parquet = None
    if chosen.companions:
        parquet = companion_records(spark, [companion for companion, _ in chosen.companions],
                                    chosen.companions[0][0].parent.parent, chosen.columns,
                                    value_type)
    if parquet is None:  # nothing converted, or a request the companions cannot answer
        files = [*chosen.segments, *(segment for _, segment in chosen.companions)]
        return _json(spark, base_path, files, value_type)
    if not chosen.segments:
        return parquet
    return parquet.unionByName(_json(spark, base_path, chosen.segments, value_type))


def companion_schema(value_type: DataType) -> StructType:
    """The columns a job reads from a companion (the file log's or a Kafka chunk); the
    ``partition`` column comes from the directory name."""
    return StructType([StructField("offset", LongType()), StructField("lsn", LongType()),
                       StructField("seq", LongType()), StructField("key", StringType()),
                       StructField("value", value_type)])


def companion_records(spark: SparkSession, files: Sequence[Path], base_path: Path,
                      columns: tuple[str, ...], value_type: DataType) -> DataFrame | None:
    """The records of companion ``files`` (under ``base_path``, holding the row
    ``columns``) as ``RECORD_COLUMNS`` with ``value`` as ``value_type``; ``None`` when the
    companions cannot give it exactly (a field they do not keep, or names Parquet's reader,
    matching without case, could take one for another)."""
    if case_clashes((*columns, *row_names(value_type))):
        return None
    stored = companion_value_type(columns)
    value = conformed(F.col("value"), stored, value_type)
    if value is None:
        return None
    direct = readable_as(stored, value_type)
    parquet = (spark.read.schema(companion_schema(value_type if direct else stored))
               .option("basePath", str(base_path))
               .parquet(*[str(f) for f in files]))
    return parquet.select(*RECORD_COLUMNS[:-1],
                          F.col("value") if direct else value.alias("value"))


def _json(spark: SparkSession, base_path: str, files: Sequence[Path],
          value_type: DataType) -> DataFrame:
    return (spark.read.schema(record_schema(value_type))
            .option("mode", "FAILFAST").option("basePath", base_path)
            .json([str(f) for f in files])
            .select(*RECORD_COLUMNS))
