"""The child ``class_archive.build_archive`` runs: a small log materialized by the jobs' own
code in a JVM that writes the classes it loaded to an archive when it exits.

Usage: python -m spark_pipelines.class_archive_job <archive> <work directory>
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
from pyspark.sql import SparkSession

from cdc.log import Position, Record
from cdc.log.file import FileLog
from cdc.log.file.directory import FileLogSettings

from .class_archive import QUIET_CDS
from .columnar_job import TopicColumns, write_companions
from .materialize_job import materialize_tables
from .session import spark_session
from .source import LogSource
from .state import load_histories

PREFIX = "warmup"
TOPIC = f"{PREFIX}.public.orders"
COLUMNS = (("id", "pg_catalog.int8", -1, True), ("status", "pg_catalog.text", -1, False),
           ("amount", "pg_catalog.numeric", ((12 << 16) | 2) + 4, False),
           ("doc", "pg_catalog.jsonb", -1, False),
           ("at", "pg_catalog.timestamptz", -1, False))
EVENTS = 20_000


def write_log(root: Path) -> None:
    """A log of inserts, updates and deletes of one table, in several segments."""
    log = FileLog(root, FileLogSettings(segment_bytes=256 * 1024, fsync=False))
    producer = log.producer()
    schema = orjson.dumps({"schema": "public", "table": "orders", "schema_version": 1,
                           "columns": [{"name": n, "type": t, "type_modifier": m, "key": k}
                                       for n, t, m, k in COLUMNS]})
    producer.append([Record(f"{PREFIX}._schemas", b'"public.orders"', schema,
                            Position(1, 0))])
    records = []
    for number in range(EVENTS):
        key = number % (EVENTS // 3)
        op = "c" if number < EVENTS // 3 else "d" if number % 50 == 0 else "u"
        after = None if op == "d" else {
            "id": key, "status": f"s{number % 7}", "amount": f"{number}.{number % 100:02d}",
            "doc": {"n": number, "tags": ["a", "b"]}, "at": "2026-11-29T10:00:00.5Z"}
        value = orjson.dumps({
            "op": op, "key": {"id": key}, "before": None, "after": after, "unchanged": [],
            "source": {"db": "app", "schema": "public", "table": "orders",
                       "lsn": str(4096 + number), "commit_lsn": str(4096 + number),
                       "seq": 0, "txid": number, "commit_ts": "2026-11-29T10:00:00Z",
                       "snapshot": False},
            "schema_version": 1})
        records.append(Record(TOPIC, orjson.dumps({"id": key}), value,
                              Position(4096 + number, 0), op == "d"))
    producer.append(records)
    log.close()


def warm_up(spark: SparkSession, work: Path) -> None:
    """Companions written, then the table materialized from them and from JSON."""
    write_log(work / "log")
    source = LogSource("file", PREFIX, work / "log")
    histories = load_histories(source)
    history = histories["public.orders"]
    columns = tuple(c.name for c in history.all_columns())
    write_companions(spark, work / "log", TopicColumns(TOPIC, columns, 1),
                     sorted(source.end_offsets(TOPIC)))
    materialize_tables(spark, source, [history], work / "out")


def main(archive: Path, work: Path) -> None:
    conf = {"spark.driver.extraJavaOptions":
            f"-XX:ArchiveClassesAtExit={archive} {QUIET_CDS}",
            "spark.sql.shuffle.partitions": "2", "spark.local.dir": str(work / "tmp")}
    with spark_session("local[2]", conf, app_name="distributary-class-archive") as spark:
        warm_up(spark, work)
        gateway = spark.sparkContext._gateway
    # the JVM writes the archive as it exits: it exits when its stdin closes
    assert gateway is not None
    process = getattr(gateway, "proc", None)
    gateway.shutdown()
    if process is not None:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=600)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
