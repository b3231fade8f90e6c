"""The shared unchanged-TOAST cases through ``materialize_table`` (Spark SQL's fill)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from cdc.log import Position, Record
from cdc.log.file import FileLog
from spark_pipelines.materialize import materialize_table
from tests.unit.derived.toast_cases import CASES, COLUMNS

TOPIC = "app.public.docs"
ROW = StructType([StructField("id", LongType()),
                  *(StructField(name, StringType()) for name in COLUMNS[1:])])
SPARK_CASES = [case for case in CASES if case.spark_differs is None]


def keyed(row: dict[str, Any] | None, key: int) -> dict[str, Any] | None:
    return None if row is None else {**row, "id": key}


def test_shared_cases(tmp_path: Path, spark: SparkSession) -> None:
    records: list[Record] = []
    for key, case in enumerate(SPARK_CASES, start=1):
        for event in case.events:
            value = orjson.dumps({"op": event.op, "key": {"id": key},
                                  "after": keyed(event.after, key),
                                  "before": keyed(event.before, key),
                                  "unchanged": list(event.unchanged)})
            records.append(Record(TOPIC, orjson.dumps({"id": key}), value,
                                  Position(10 + len(records), 0), event.op == "d"))
    log = FileLog(tmp_path / "log")
    log.producer().append(records)
    log.close()
    rows = materialize_table(spark, tmp_path / "log", TOPIC, ROW).collect()
    state = {row["id"]: {name: row[name] for name in COLUMNS} for row in rows}
    named = {SPARK_CASES[key - 1].name: row for key, row in state.items()}
    assert named == {case.name: {name: key if name == "id" else case.row.get(name)
                                 for name in COLUMNS}
                     for key, case in enumerate(SPARK_CASES, start=1)}
