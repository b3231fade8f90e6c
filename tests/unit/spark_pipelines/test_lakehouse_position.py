"""The Delta table's log position: its commit metadata, when an update may be
incremental, and Delta's settings added to a pipeline's Spark conf."""

from __future__ import annotations

from spark_pipelines.columns import Column, TableColumns
from spark_pipelines.lakehouse import (
    DELTA_PACKAGE,
    LogPosition,
    Version,
    describe_version,
    version_at,
    why_write_whole,
    with_delta,
)
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


def test_the_version_at_an_lsn_is_the_newest_at_or_before_it() -> None:
    known = [Version(3, "2026-11-29 05:03:00", LogPosition(TOPIC, {0: 30}, 300, 2)),
             Version(2, "2026-11-29 05:02:00", None),  # column mapping turned on
             Version(1, "2026-11-29 05:01:00", LogPosition(TOPIC, {0: 20}, 200, 2)),
             Version(0, "2026-11-29 05:00:00", LogPosition(TOPIC, {0: 10}, 100, 2))]
    assert version_at(known, 99) is None
    assert version_at(known, 100) == known[3]
    assert version_at(known, 299) == known[2]
    assert version_at(known, 300) == known[0]
    assert describe_version(known[2]) == ("version=1 lsn=0/C8 offsets=0:20 "
                                          "committed=2026-11-29 05:01:00")
    assert "lsn=unknown" in describe_version(known[1])
