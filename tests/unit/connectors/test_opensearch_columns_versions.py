"""A new schema version is read at once, whatever ``reread_interval``; a missing one is
looked for again only after the interval (the sink writes documents meanwhile)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc.log.file import FileLog, FileLogSettings
from connectors.opensearch.columns import SchemaTopicColumns

from .test_opensearch_columns import TOPIC, schema_record


@pytest.fixture
def schema_log(tmp_path: Path) -> Iterator[FileLog]:
    log = FileLog(tmp_path / "log", FileLogSettings(default_partitions=3, fsync=False))
    yield log
    log.close()


def test_a_new_version_is_read_at_once_within_the_interval(schema_log: FileLog) -> None:
    producer = schema_log.producer()
    producer.append([schema_record("orders", 1, {"id": "pg_catalog.int4"})])
    columns = SchemaTopicColumns(schema_log, TOPIC, "g", reread_interval=3600)
    assert columns("public", "orders", 1) == {"id": "pg_catalog.int4"}
    producer.append([schema_record("orders", 2, {"id": "pg_catalog.int4",
                                                 "price": "pg_catalog.numeric"})])
    assert columns("public", "orders", 2) == {"id": "pg_catalog.int4",
                                              "price": "pg_catalog.numeric"}


def test_a_missing_version_is_not_looked_for_on_every_call(schema_log: FileLog) -> None:
    producer = schema_log.producer()
    producer.append([schema_record("orders", 1, {"id": "pg_catalog.int4"})])
    columns = SchemaTopicColumns(schema_log, TOPIC, "g", reread_interval=3600)
    assert columns("public", "orders", 3) == {"id": "pg_catalog.int4"}  # the newest known
    producer.append([schema_record("orders", 3, {"id": "pg_catalog.int8"})])
    assert columns("public", "orders", 3) == {"id": "pg_catalog.int4"}, "within the interval"
    producer.append([schema_record("orders", 4, {"id": "pg_catalog.text"})])
    assert columns("public", "orders", 4) == {"id": "pg_catalog.text"}
