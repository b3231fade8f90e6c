"""Spark's materialize across schema versions: a log written by the real capture through
ADD COLUMN and DROP COLUMN gives the table's rows (read with the newest version's columns)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from cdc.capture.runner import Capture
from spark_pipelines.materialize import materialize_table

from .conftest import CaptureEnv
from .snapshot_check import use_config
from .test_schema_evolution import versions_of

SPARK_TYPES = {"pg_catalog.int4": LongType(), "pg_catalog.int8": LongType(),
               "pg_catalog.text": StringType()}


def _row_schema(record: dict[str, Any]) -> StructType:
    return StructType([StructField(c["name"], SPARK_TYPES[c["type"]])
                       for c in record["columns"]])


def test_materialize_across_add_and_drop_column(capture_env: CaptureEnv,
                                                run_capture: Callable[[], Capture],
                                                spark: SparkSession) -> None:
    env = capture_env
    env.sql("CREATE TABLE t (id int PRIMARY KEY, a int, b text, body text)",
            "ALTER TABLE t ALTER COLUMN body SET STORAGE EXTERNAL")
    use_config(env, schema_changes="{default: ignore}")  # no re-reads
    run_capture()
    env.sql("INSERT INTO t SELECT g, g * 10, 'b' || g, repeat('x', 5000) FROM "
            "generate_series(1, 6) g")
    env.sql("ALTER TABLE t ADD COLUMN c text")  # version 2
    env.sql("UPDATE t SET c = 'c2' WHERE id = 2")  # body unchanged: not resent
    env.sql("INSERT INTO t VALUES (7, 70, 'b7', 'short', 'c7')")
    env.sql("ALTER TABLE t DROP COLUMN b")  # version 3
    env.sql("UPDATE t SET a = 31 WHERE id = 3", "DELETE FROM t WHERE id = 1",
            "INSERT INTO t (id, a, body, c) VALUES (8, 80, 'eight', 'c8')")
    env.sql("UPDATE t SET c = 'c7b' WHERE id = 7")
    env.wait_for("t", 6 + 1 + 1 + 3 + 1)
    versions = versions_of(env, "t")
    assert sorted(versions) == [1, 2, 3]
    newest = _row_schema(versions[3])
    assert newest.fieldNames() == ["id", "a", "body", "c"]

    rows = materialize_table(spark, env.log_dir, env.topic("t"), newest).collect()
    state = {r["id"]: (r["a"], r["body"], r["c"]) for r in rows}
    with psycopg.connect(env.dsn) as conn:
        table = {i: (a, body, c) for i, a, body, c in
                 conn.execute("SELECT id, a, body, c FROM t").fetchall()}
    assert state == table
    assert state[2] == (20, "x" * 5000, "c2"), "TOASTed body from before ADD COLUMN"
    assert state[4] == (40, "x" * 5000, None), "untouched since version 1: c is NULL"

    # read with an older version's columns, the dropped column shows what the newest
    # event of each row held (NULL once a row changed after the drop)
    old = materialize_table(spark, env.log_dir, env.topic("t"), _row_schema(versions[2]))
    by_id = {r["id"]: r["b"] for r in old.collect()}
    assert by_id[4] == "b4" and by_id[3] is None and by_id[8] is None
