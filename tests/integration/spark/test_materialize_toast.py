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


def test_a_key_change_keeps_the_old_keys_unchanged_values(tmp_path: Path,
                                                           spark: SparkSession) -> None:
    """A key change is a delete of the old key and, at the next position, an insert of
    the new one without its unchanged TOAST column: the value is the old key's."""
    first, second = COLUMNS[1], COLUMNS[2]

    def record(op: str, key: int, after: dict[str, Any] | None, unchanged: list[str],
               position: Position) -> Record:
        value = orjson.dumps({"op": op, "key": {"id": key}, "after": after,
                              "unchanged": unchanged})
        return Record(TOPIC, orjson.dumps({"id": key}), value, position, op == "d")

    records = [
        record("c", 1, {"id": 1, first: "big", second: "a"}, [], Position(10, 0)),
        record("u", 1, {"id": 1, second: "b"}, [first], Position(11, 0)),
        record("d", 1, None, [], Position(12, 0)),
        record("c", 7, {"id": 7, second: "c"}, [first], Position(12, 1)),
        # a plain delete, then an unrelated insert at the next position: nothing taken
        record("c", 2, {"id": 2, first: "other", second: "x"}, [], Position(13, 0)),
        record("d", 2, None, [], Position(14, 0)),
        record("c", 3, {"id": 3, second: "y"}, [], Position(14, 1)),
    ]
    log = FileLog(tmp_path / "log")
    log.producer().append(records)
    log.close()
    rows = materialize_table(spark, tmp_path / "log", TOPIC, ROW).collect()
    state = {row["id"]: (row[first], row[second]) for row in rows}
    assert state == {7: ("big", "c"), 3: (None, "y")}
