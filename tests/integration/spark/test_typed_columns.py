"""Typed columns without losing a value: the values a Spark type cannot hold are found
while the state is written (``observed_typed_state``), and only then is the column kept
as its text (``typed_as_found``) — the same result as checking first (``typed_state``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_pipelines.columns import Column, TableColumns
from spark_pipelines.typed import KeptAsText, observed_typed_state, typed_as_found, typed_state

pytestmark = pytest.mark.integration

TABLE = TableColumns("public", "typed", 1, (
    Column("id", "pg_catalog.int4", key=True), Column("at", "pg_catalog.timestamptz"),
    Column("amount", "pg_catalog.numeric", 655366), Column("note", "pg_catalog.text")))


def written(spark: Any, rows: list[tuple[Any, ...]], target: Path
            ) -> tuple[list[KeptAsText], Any]:
    state = spark.createDataFrame(rows, "id string, at string, amount string, note string, "
                                        "_lsn long")
    typed, lost = observed_typed_state(state, TABLE, ("_lsn",))
    typed.write.mode("overwrite").parquet(str(target))
    return lost(), spark.read.parquet(str(target))


def test_a_value_lost_to_its_type_is_seen_in_the_write(spark: Any, tmp_path: Path) -> None:
    clean = [("1", "2026-11-29 10:00:00+00", "12.50", "a", 7),
             ("2", None, None, None, 8)]
    lost, frame = written(spark, clean, tmp_path / "clean")
    assert lost == []
    assert dict(frame.dtypes) == {"id": "bigint", "at": "timestamp", "amount": "decimal(10,2)",
                                  "note": "string", "_lsn": "bigint"}
    assert sorted((r["id"], str(r["amount"]), r["_lsn"]) for r in frame.collect()) == [
        (1, "12.50", 7), (2, "None", 8)]

    odd = [*clean, ("3", "infinity", "1.00", "b", 9), ("4", "-infinity", "2.00", "c", 10)]
    lost, _ = written(spark, odd, tmp_path / "odd")
    assert [(k.column, k.values, k.example) for k in lost] == [("at", 2, "-infinity")], \
        "'infinity' became NULL on the way: the job must write the column as text"
    state = spark.createDataFrame(odd, "id string, at string, amount string, note string, "
                                       "_lsn long")
    typed, kept = typed_state(state, TABLE, ("_lsn",))
    assert kept == lost
    assert dict(typed.dtypes)["at"] == "string"
    again = typed_as_found(state, TABLE, lost, ("_lsn",))
    assert again.dtypes == typed.dtypes
    assert sorted(again.collect()) == sorted(typed.collect())
    assert sorted(r["at"] for r in again.collect() if r["at"] and "inf" in r["at"]) == [
        "-infinity", "infinity"]
