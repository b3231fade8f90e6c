"""The Delta table's log position: its commit metadata, when an update may be
incremental, and Delta's settings added to a pipeline's Spark conf."""

from __future__ import annotations

from spark_pipelines.columns import Column, TableColumns
from spark_pipelines.lakehouse import DELTA_PACKAGE, LogPosition, why_write_whole, with_delta
from spark_pipelines.state import TableHistory

TOPIC = "app.public.items"
HISTORY = TableHistory(TableColumns("public", "items", 2, (Column("id", "int8", -1, True),)))
LAST = LogPosition(TOPIC, {0: 10, 1: 20}, 0x16B37A0, 2)


def test_the_position_goes_through_the_commit_metadata() -> None:
    text = LAST.to_json()
    assert '"ends":{"0":10,"1":20}' in text
    assert LogPosition.from_json(text) == LAST


def test_metadata_that_is_not_ours_is_no_position() -> None:
    for text in (None, "", "not json", '{"other": 1}', '{"distributary": {"topic": "t"}}',
                 '{"distributary": {"topic": "t", "ends": [], "lsn": 1, "schema_version": 1}}',
                 "[1, 2]"):
        assert LogPosition.from_json(text) is None, text


def test_an_update_from_the_same_log_is_incremental() -> None:
    assert why_write_whole(LAST, TOPIC, {0: (0, 10), 1: (5, 40)}, HISTORY) is None
    assert why_write_whole(LAST, TOPIC, {0: (10, 12), 1: (20, 20), 2: (0, 3)}, HISTORY) is None


def test_what_writes_the_table_whole() -> None:
    assert "no Delta table" in str(why_write_whole(None, TOPIC, {0: (0, 1)}, HISTORY))
    assert "from topic other" in str(why_write_whole(
        LogPosition("other", {0: 1}, 1, 2), TOPIC, {0: (0, 1)}, HISTORY))
    assert "schema version 2 since version 1" in str(why_write_whole(
        LogPosition(TOPIC, {0: 1}, 1, 1), TOPIC, {0: (0, 1)}, HISTORY))
    assert "ends before" in str(why_write_whole(LAST, TOPIC, {0: (0, 9), 1: (0, 20)}, HISTORY))
    assert "ends before" in str(why_write_whole(LAST, TOPIC, {0: (0, 10)}, HISTORY))
    gone = why_write_whole(LAST, TOPIC, {0: (11, 30), 1: (20, 30)}, HISTORY)
    assert gone == ("retention removed records the table had not taken yet: "
                    "partition 0 from 10 to 11")


def test_delta_is_added_to_the_pipelines_own_settings() -> None:
    settings = with_delta({"spark.sql.extensions": "com.example.Ext",
                           "spark.jars.packages": "org.example:x:1"})
    assert settings["spark.jars.packages"] == f"org.example:x:1,{DELTA_PACKAGE}"
    assert settings["spark.sql.extensions"] == \
        "com.example.Ext,io.delta.sql.DeltaSparkSessionExtension"
    assert settings["spark.sql.catalog.spark_catalog"] == \
        "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert with_delta(settings) == settings  # once is enough
    pinned = with_delta({"spark.jars.packages": "io.delta:delta-spark_2.13:4.0.1"})
    assert pinned["spark.jars.packages"] == "io.delta:delta-spark_2.13:4.0.1"
