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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.crashpoints import crash_point

from .columnar import companion_value_type
from .companions import (
    Manifest,
    SegmentStamp,
    SupportsJson,
    check_companion,
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
def companion_lock(root: Path) -> Iterator[None]:
    """Hold the lock of the companions under ``root`` (``ColumnarBusy`` when another
    writer has it)."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ColumnarBusy(f"another `cdc log columnar` is writing companions under "
                               f"{root}; wait for it or stop it") from None
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
        remove_leftovers(directory)
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


def remove_leftovers(directory: Path) -> None:
    """Remove what a writer killed on the way left in ``directory``."""
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
    frame = (spark.read.schema(record_schema(companion_value_type(wanted.columns)))
             .option("mode", "FAILFAST").json(str(segment)))
    return write_companion(
        frame, parquet, manifest_path, f"{base}", wanted.newest_version, str(segment),
        lambda records: "" if records == lines else
        f"{records} records read from {lines} lines: segment left as JSON",
        lambda records, size, crc: Manifest(stamp, lines, size, crc, wanted.columns))


Check = Callable[[int], str]
"""The records written → ``""``, or why the companion is not kept."""


def write_companion(frame: DataFrame, parquet: Path, manifest_path: Path, name: str,
                    newest_version: int, what: str, check: Check,
                    manifest: Callable[[int, int, int], SupportsJson]) -> str:
    """Write ``frame`` (the records of ``what``) as the one Parquet file ``parquet``, then
    its manifest (``manifest(records, bytes, crc)``), durably, the manifest last; ``""``
    when done, else why not (nothing is left in place then). No event may be of a schema
    version past ``newest_version`` (its schema record is not read yet)."""
    tmp = parquet.parent / f"{TMP_PREFIX}{name}-{os.getpid()}"
    try:
        frame.coalesce(1).write.mode("overwrite").parquet(str(tmp))
    except Exception as exc:  # Spark's errors share no base class; the records stay as they are
        shutil.rmtree(tmp, ignore_errors=True)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"Spark could not read {what}: {reason[:300]}"
    crash_point("columnar.parquet_written")
    written = [p for p in tmp.iterdir() if p.name.endswith(".parquet")]
    if len(written) != 1:
        shutil.rmtree(tmp, ignore_errors=True)
        return f"Spark wrote {len(written)} files instead of one"
    spark = frame.sparkSession
    found = spark.read.parquet(str(written[0])).agg(
        F.count(F.lit(1)).alias("records"),
        F.max("value.schema_version").alias("version")).collect()[0]
    records, version = int(found["records"]), int(found["version"] or 0)
    size = written[0].stat().st_size
    crc = file_crc(written[0])
    problem = (f"an event of schema version {version}, newer than the schema topic's "
               f"{newest_version}: written when the schema record is read"
               if version > newest_version else check(records))
    if problem:
        shutil.rmtree(tmp, ignore_errors=True)
        return problem
    with open(written[0], "rb") as file:
        os.fsync(file.fileno())
    manifest_path.unlink(missing_ok=True)  # an old manifest never vouches for a new file
    os.replace(written[0], parquet)
    sync_dir(parquet.parent)
    shutil.rmtree(tmp, ignore_errors=True)
    crash_point("columnar.before_manifest")
    write_manifest(manifest_path, manifest(records, size, crc))
    return ""


def _count_lines(path: Path) -> int:
    count = 0
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            count += chunk.count(b"\n")
    return count
