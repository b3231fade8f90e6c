"""The ``materialize`` and ``state-as-of`` jobs: each table's state as a Parquet dataset,
checked by row count and content checksum (``checksum``) read back from what was written.

Output: ``<output>/<schema.table>`` for the current state; ``<output>/as_of_<lsn>/
<schema.table>`` for a state as of a commit LSN (a time is first turned into the newest
commit LSN at or before it). Columns are the table's newest columns with their types
(``columns.spark_type``), then ``_lsn`` and ``_seq``: the position of the row's last event.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from cdc.capture.lsn import format_lsn

from .checksum import spark_checksum
from .materialize import POSITION_COLUMNS
from .source import LogSource
from .state import TableHistory, text_state
from .typed import observed_typed_state, typed_as_found

if TYPE_CHECKING:
    from .task_writes import TaskCounts


@dataclass(slots=True)
class TableResult:
    """What a job did with one table (or one derived dataset)."""

    name: str
    rows: int
    checksum: str
    path: Path | str  # a dataset's directory, or where a rebuild wrote
    seconds: float
    warnings: list[str] = field(default_factory=list)
    tasks: TaskCounts | None = None  # a rebuild: what each Spark task wrote


def output_dir(output: Path, as_of_lsn: int | None) -> Path:
    """Where a job writes: ``output`` itself, or ``output/as_of_<lsn>``."""
    if as_of_lsn is None:
        return output
    return output / f"as_of_{format_lsn(as_of_lsn).replace('/', '_')}"


def materialize_tables(spark: SparkSession, source: LogSource, tables: Sequence[TableHistory],
                       output: Path, *, as_of_lsn: int | None = None) -> list[TableResult]:
    """Write each table's state (as of ``as_of_lsn`` if given) and check it."""
    results = []
    for history in tables:
        started = time.perf_counter()
        ends = source.end_offsets(source.topic(history.name))
        state = text_state(spark, source, history, ends, as_of_lsn=as_of_lsn)
        typed, lost = observed_typed_state(state, history.newest, POSITION_COLUMNS)
        target = output_dir(output, as_of_lsn) / history.name
        typed.write.mode("overwrite").parquet(str(target))
        kept = lost()
        if kept:  # a value did not fit its type: such columns are written as text
            typed = typed_as_found(state, history.newest, kept, POSITION_COLUMNS)
            typed.write.mode("overwrite").parquet(str(target))
        written = spark.read.parquet(str(target)).drop(*POSITION_COLUMNS)
        rows, checksum = spark_checksum(written)
        spark.catalog.clearCache()
        results.append(TableResult(history.name, rows, checksum, target,
                                   time.perf_counter() - started,
                                   [k.warning(history.name) for k in kept]))
    return results
