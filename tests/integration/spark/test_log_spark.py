"""PySpark's JSON reader and the Python consumer read the same events from a file log."""

from __future__ import annotations

from pathlib import Path

import orjson
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from cdc.log import Position, Record, StartAt
from cdc.log.file import FileLog
from spark_pipelines.log_source import read_topic

TOPIC = "app.public.orders"


def test_spark_and_python_consumer_read_the_same_events(tmp_path: Path,
                                                        spark: SparkSession) -> None:
    log = FileLog(tmp_path / "log")
    events = [{"op": "u", "key": {"id": i}, "after": {"id": i, "status": f"s{i % 7}",
                                                     "amount": f"{i}.25"}}
              for i in range(500)]
    log.producer().append([Record(TOPIC, orjson.dumps(e["key"]), orjson.dumps(e),
                                  Position(100 + i, 0)) for i, e in enumerate(events)])
    consumer = log.consumer("py", topics=[TOPIC], start=StartAt.earliest())
    python_side = set()
    while batch := consumer.poll(1000, timeout=0.5):
        python_side |= {(m.partition, m.offset, m.position.commit_lsn,
                         orjson.loads(m.value)["after"]["status"]) for m in batch}
    consumer.close()
    log.close()

    value_type = StructType([
        StructField("op", StringType()),
        StructField("key", StructType([StructField("id", LongType())])),
        StructField("after", StructType([StructField("id", LongType()),
                                         StructField("status", StringType()),
                                         StructField("amount", StringType())])),
    ])
    frame = read_topic(spark, tmp_path / "log", TOPIC, value_type)
    rows = frame.select("partition", "offset", "lsn", "value.after.status").collect()
    spark_side = {(r["partition"], r["offset"], r["lsn"], r["status"]) for r in rows}
    assert len(python_side) == 500
    assert spark_side == python_side
    amounts = frame.select("value.after.amount").distinct().count()
    assert amounts == 500, "string values (numeric text) kept exactly"
