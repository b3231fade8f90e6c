"""``materialize_table``: newest event per key by position, deletes, truncates, TOAST."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pyspark.sql import SparkSession
from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType

from cdc.log import Position, Record
from cdc.log.file import FileLog
from spark_pipelines.materialize import materialize_table

TOPIC = "app.public.docs"
ROW = StructType([StructField("id", LongType()), StructField("title", StringType()),
                  StructField("body", StringType())])


def event(op: str, key: int | None, after: dict[str, Any] | None,
          unchanged: list[str] | None = None) -> bytes:
    return orjson.dumps({"op": op, "key": {} if key is None else {"id": key}, "after": after,
                         "before": None, "unchanged": unchanged or []})


def test_state_from_events(tmp_path: Path, spark: SparkSession) -> None:
    log = FileLog(tmp_path / "log")
    writes = [  # (commit lsn, seq, key, event)
        (10, 0, 1, event("c", 1, {"id": 1, "title": "a", "body": "long text"})),
        (10, 1, 2, event("c", 2, {"id": 2, "title": "b", "body": "x"})),
        (20, 0, None, event("t", None, None)),
        (30, 0, 3, event("c", 3, {"id": 3, "title": "c", "body": "big"})),
        (30, 1, 4, event("c", 4, {"id": 4, "title": "d", "body": "y"})),
        (40, 0, 3, event("u", 3, {"id": 3, "title": "c2", "body": None}, ["body"])),
        (40, 1, 4, event("d", 4, None)),
        (50, 2, 5, event("c", 5, {"id": 5, "title": "e", "body": "z"})),
        (50, 1, 5, event("u", 5, {"id": 5, "title": "older", "body": "z"})),
    ]
    log.producer().append([
        Record(TOPIC, b"{}" if key is None else orjson.dumps({"id": key}), value,
               Position(lsn, seq), value.startswith(b'{"op":"d"'))
        for lsn, seq, key, value in writes])
    log.close()
    rows = materialize_table(spark, tmp_path / "log", TOPIC, ROW).collect()
    state = {r["id"]: (r["title"], r["body"], r["_lsn"], r["_seq"]) for r in rows}
    assert state == {3: ("c2", "big", 40, 0), 5: ("e", "z", 50, 2)}
    before_truncate = materialize_table(spark, tmp_path / "log", TOPIC, ROW, as_of_lsn=10)
    assert {r["id"] for r in before_truncate.collect()} == {1, 2}


def test_row_schema_from_the_schema_topic(tmp_path: Path, spark: SparkSession) -> None:
    from spark_pipelines.source import LogSource
    from spark_pipelines.state import load_histories

    log = FileLog(tmp_path / "log")
    versions = [{"schema": "public", "table": "docs", "schema_version": v,
                 "columns": [{"name": "id", "type": "pg_catalog.int4"},
                             {"name": "price", "type": "pg_catalog.numeric",
                              "type_modifier": ((12 << 16) | 2) + 4},
                             {"name": "big", "type": "pg_catalog.numeric"}][:v + 1]}
                for v in (1, 2)]
    log.producer().append([Record("app._schemas", b'"public.docs"', orjson.dumps(v))
                           for v in versions])
    log.close()
    history = load_histories(LogSource("file", "app", tmp_path / "log"))["public.docs"]
    assert history.newest.version == 2
    assert history.newest.typed_schema() == StructType([
        StructField("id", LongType()), StructField("price", DecimalType(12, 2)),
        StructField("big", StringType())])
