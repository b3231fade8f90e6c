"""Write the columnar companions of a file log's sealed segments (``cdc log columnar``).

For every sealed segment of a topic without a companion that matches it, one Parquet file
is written from the segment by Spark's JSON reader (``columnar.companion_value_type``:
the row columns of every schema version of the topic's tables), checked (as many records
as the segment has lines; no event of a schema version the schema topic does not list
yet: such a segment waits for the next round) and moved into place, its manifest last
(``companions``). Companions whose segment is gone are removed. One writer at a time per
log: a lock file under ``_columnar``.

A process killed on the way leaves at most a temporary directory (removed by the next
run) or a Parquet file without a manifest (never read, written again).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc.crashpoints import crash_point

from .columnar import companion_value_type
from .companions import (
    Manifest,
    SegmentStamp,
    check_companion,
    columnar_root,
    companion_bases,
    companion_dir,
    companion_paths,
    file_crc,
    partition_segments,
    remove_companion,
    sealed,
    segment_path,
    sync_dir,
    write_manifest,
)
from .log_source import record_schema

TMP_PREFIX = ".tmp-"


class ColumnarBusy(Exception):
    """Another writer holds the log's companion lock."""


@dataclass(slots=True)
class TopicCompanions:
    """What one round did for one topic."""

    topic: str
    written: int = 0
    kept: int = 0
    removed: int = 0
    waiting: list[str] = field(default_factory=list)  # why a segment was left for later
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class TopicColumns:
    """A topic to convert: its row columns (every version) and newest schema version."""

    topic: str
    columns: tuple[str, ...]
    newest_version: int


@contextmanager
def companion_lock(log_root: Path) -> Iterator[None]:
    """Hold the log's companion lock (``ColumnarBusy`` when another writer has it)."""
    root = columnar_root(log_root)
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ColumnarBusy(f"another `cdc log columnar` is writing companions of "
                               f"{log_root}; wait for it or stop it") from None
        yield
    finally:
        os.close(fd)


def write_companions(spark: SparkSession, log_root: Path, wanted: TopicColumns,
                     partitions: Sequence[int]) -> TopicCompanions:
    """One round for one topic (the caller holds ``companion_lock``)."""
    started = time.perf_counter()
    report = TopicCompanions(wanted.topic)
    for partition in partitions:
        directory = companion_dir(log_root, wanted.topic, partition)
        _remove_leftovers(directory)
        bases = partition_segments(log_root, wanted.topic, partition)
        for base in companion_bases(log_root, wanted.topic, partition):
            if base not in bases:
                remove_companion(log_root, wanted.topic, partition, base)
                report.removed += 1
        for base in sealed(bases):
            verdict = check_companion(log_root, wanted.topic, partition, base)
            if verdict.usable:
                report.kept += 1
                continue
            directory.mkdir(parents=True, exist_ok=True)
            problem = _write_one(spark, log_root, wanted, partition, base)
            if problem:
                report.waiting.append(f"partition {partition} segment {base}: {problem}")
            else:
                report.written += 1
    report.seconds = time.perf_counter() - started
    return report


def _remove_leftovers(directory: Path) -> None:
    if not directory.exists():
        return
    for entry in directory.iterdir():
        if entry.name.startswith(TMP_PREFIX):
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.name.startswith(".") and entry.name.endswith(".tmp"):
            entry.unlink(missing_ok=True)


def _write_one(spark: SparkSession, log_root: Path, wanted: TopicColumns, partition: int,
               base: int) -> str:
    """Write one segment's companion; ``""`` when done, else why it was not."""
    segment = segment_path(log_root, wanted.topic, partition, base)
    try:
        stamp = SegmentStamp.of(segment)
        lines = _count_lines(segment)
    except FileNotFoundError:
        return "its segment is gone (retention or compaction removed it meanwhile)"
    parquet, manifest_path = companion_paths(log_root, wanted.topic, partition, base)
    tmp = parquet.parent / f"{TMP_PREFIX}{base}-{os.getpid()}"
    stored = companion_value_type(wanted.columns)
    try:
        (spark.read.schema(record_schema(stored)).option("mode", "FAILFAST")
         .json(str(segment)).coalesce(1).write.mode("overwrite").parquet(str(tmp)))
    except Exception as exc:  # Spark's errors share no base class; the segment stays JSON
        shutil.rmtree(tmp, ignore_errors=True)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"Spark could not read {segment}: {reason[:300]}"
    crash_point("columnar.parquet_written")
    written = [p for p in tmp.iterdir() if p.name.endswith(".parquet")]
    if len(written) != 1:
        shutil.rmtree(tmp, ignore_errors=True)
        return f"Spark wrote {len(written)} files instead of one"
    check = spark.read.parquet(str(written[0])).agg(
        F.count(F.lit(1)).alias("records"),
        F.max("value.schema_version").alias("version")).collect()[0]
    version = int(check["version"] or 0)
    if int(check["records"]) != lines or version > wanted.newest_version:
        shutil.rmtree(tmp, ignore_errors=True)
        if version > wanted.newest_version:
            return (f"an event of schema version {version}, newer than the schema topic's "
                    f"{wanted.newest_version}: written when the schema record is read")
        return f"{check['records']} records read from {lines} lines: segment left as JSON"
    with open(written[0], "rb") as file:
        os.fsync(file.fileno())
    manifest_path.unlink(missing_ok=True)  # an old manifest never vouches for a new file
    os.replace(written[0], parquet)
    sync_dir(parquet.parent)
    shutil.rmtree(tmp, ignore_errors=True)
    crash_point("columnar.before_manifest")
    write_manifest(manifest_path, Manifest(stamp, lines, parquet.stat().st_size,
                                           file_crc(parquet), wanted.columns))
    return ""


def _count_lines(path: Path) -> int:
    count = 0
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            count += chunk.count(b"\n")
    return count
