"""Column types from the capture's schema topic, for exact OpenSearch mappings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from cdc.log import Record
from cdc.log.file import FileLog, FileLogSettings
from connectors.opensearch.columns import SchemaTopicColumns

TOPIC = "app._schemas"


@pytest.fixture
def schema_log(tmp_path: Path) -> Iterator[FileLog]:
    log = FileLog(tmp_path / "log", FileLogSettings(default_partitions=3, fsync=False))
    yield log
    log.close()


def schema_record(table: str, version: int, columns: dict[str, str]) -> Record:
    value = {"schema": "public", "table": table, "schema_version": version,
             "columns": [{"name": n, "type": t, "key": n == "id"} for n, t in columns.items()]}
    return Record(TOPIC, orjson.dumps(f"public.{table}"), orjson.dumps(value))


def test_types_of_the_latest_schema_version(schema_log: FileLog) -> None:
    producer = schema_log.producer()
    producer.append([schema_record("orders", 1, {"id": "pg_catalog.int4"}),
                     schema_record("items", 1, {"sku": "pg_catalog.text"}),
                     schema_record("orders", 2, {"id": "pg_catalog.int4",
                                                 "price": "pg_catalog.numeric"})])
    columns = SchemaTopicColumns(schema_log, TOPIC, "test-schemas", reread_interval=0)
    assert columns("public", "orders", 2) == {"id": "pg_catalog.int4",
                                              "price": "pg_catalog.numeric"}
    assert columns("public", "items", 1) == {"sku": "pg_catalog.text"}
    assert columns("public", "nope", 1) is None


def test_a_newer_version_rereads_the_topic(schema_log: FileLog) -> None:
    producer = schema_log.producer()
    producer.append([schema_record("orders", 1, {"id": "pg_catalog.int4"})])
    columns = SchemaTopicColumns(schema_log, TOPIC, "test-schemas", reread_interval=0)
    assert columns("public", "orders", 1) == {"id": "pg_catalog.int4"}
    producer.append([schema_record("orders", 2, {"id": "pg_catalog.int8"})])
    assert columns("public", "orders", 2) == {"id": "pg_catalog.int8"}


def test_no_schema_topic_means_no_types(schema_log: FileLog) -> None:
    assert SchemaTopicColumns(schema_log, TOPIC, "g", reread_interval=0)("public", "x", 1) is None
