"""Column types from the capture's schema topic, for exact OpenSearch mappings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from cdc.log import Record
from cdc.log.file import FileLog, FileLogSettings
from connectors.opensearch.columns import NEWEST, NEWEST_REREAD_S, SchemaTopicColumns

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


def test_the_newest_version_is_read_again_at_most_once_a_second(
        schema_log: FileLog) -> None:
    """A joined record's rows carry no schema version: asked for ``NEWEST``, the topic is
    read again (a column added since), but not on every call."""
    now = [100.0]
    producer = schema_log.producer()
    producer.append([schema_record("customers", 1, {"id": "pg_catalog.int4"})])
    columns = SchemaTopicColumns(schema_log, TOPIC, "test-schemas", reread_interval=60,
                                 clock=lambda: now[0])
    assert columns("public", "customers", 0) == {"id": "pg_catalog.int4"}
    producer.append([schema_record("customers", 2, {"id": "pg_catalog.int4",
                                                    "since": "pg_catalog.date"})])
    assert columns("public", "customers", 0) == {"id": "pg_catalog.int4"}, "known: not read"
    assert columns("public", "customers", NEWEST) == {"id": "pg_catalog.int4"}, "read just now"
    now[0] += NEWEST_REREAD_S
    newest = {"id": "pg_catalog.int4", "since": "pg_catalog.date"}
    assert columns("public", "customers", NEWEST) == newest
    producer.append([schema_record("customers", 3, {"id": "pg_catalog.int8"})])
    assert columns("public", "customers", NEWEST) == newest, "read again within the second"
    assert columns("public", "customers", 3) == {"id": "pg_catalog.int8"}, \
        "a version met in an event is still read at once"
