"""The events a rebuild task makes of its state rows (``sink_events``) against a plain
reference: rows as ``DataFrame.toJSON`` gives them (a null column left out), every
schema version's columns, each value through ``columns.json_value``; and the message a
sink may read raw (the event's JSON), which the Redis sink's native renderer takes."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.capture.lsn import format_lsn
from connectors.contract import SinkEvent, version_of
from connectors.redis import RedisSinkConfig
from connectors.redis.keys import KeyTemplates
from connectors.redis.native_rows import NativeRows
from spark_pipelines.columns import json_value, passes_text, table_columns
from spark_pipelines.sink_events import RowEvents, event_batches
from spark_pipelines.state import TableHistory

TOPIC = "app.public.items"


def history() -> TableHistory:
    """Version 1: id, note, score, doc, flag; version 2 drops score, adds tags and mood (a
    user type); versions 3+ are unknown (the newest's columns)."""
    def columns(version: int, *named: tuple[str, str]) -> dict[str, Any]:
        return {"schema": "public", "table": "items", "schema_version": version,
                "columns": [{"name": name, "type": kind, "key": name == "id"}
                            for name, kind in named]}

    first = table_columns(columns(1, ("id", "pg_catalog.int8"), ("note", "pg_catalog.text"),
                                  ("score", "pg_catalog.float8"), ("doc", "pg_catalog.jsonb"),
                                  ("flag", "pg_catalog.bool")))
    second = table_columns(columns(2, ("id", "pg_catalog.int8"), ("tags", "pg_catalog._text"),
                                   ("note", "pg_catalog.text"), ("doc", "pg_catalog.jsonb"),
                                   ("flag", "pg_catalog.bool"), ("mood", "public.mood")))
    found = TableHistory(second)
    found.versions.update({1: first, 2: second})
    return found


HISTORY = history()

TEXTS: dict[str, st.SearchStrategy[str]] = {
    "id": st.integers(-(2**63), 2**63 - 1).map(str),
    "note": st.text(),
    "score": st.one_of(st.floats(allow_nan=False).map(repr),
                       st.sampled_from(["NaN", "Infinity", "-Infinity", "1e300"])),
    "doc": st.one_of(st.sampled_from(['{"a": [1, null]}', "[1,2]", '"x"', "{bad"]), st.text()),
    "flag": st.sampled_from(["true", "false"]),
    "tags": st.sampled_from(["{a,b}", "{}", '{"x y"}']),
    "mood": st.sampled_from(["happy", "{odd", "[1]"]),
}


@st.composite
def state_rows(draw: st.DrawFn) -> dict[str, Any]:
    """A row of ``text_state``: every column of every version (or null), the internals."""
    op = draw(st.sampled_from(["c", "u", "r", "d", "t"]))
    row: dict[str, Any] = {name: draw(st.none() | strategy) for name, strategy in TEXTS.items()}
    key = {"id": draw(st.integers(-(2**63), 2**63 - 1) | st.text())}
    row.update(_lsn=draw(st.integers(0, 2**63 - 1)), _seq=draw(st.integers(0, 5000)),
               _key=orjson.dumps(key).decode() if op != "t" else "{}", _op=op,
               _schema_version=draw(st.sampled_from([1, 2, 3, None])))
    return row


def reference(row: dict[str, Any]) -> dict[str, Any]:
    """The event of a state row, plainly."""
    op = row["_op"]
    after = None
    if op in ("c", "u", "r"):
        after = {column.name: json_value(column, row.get(column.name))
                 for column in HISTORY.columns_at(int(row["_schema_version"] or 0))}
    return {"op": op, "key": orjson.loads(row["_key"]) if op != "t" else {}, "before": None,
            "after": after, "unchanged": [],
            "source": {"schema": "public", "table": "items",
                       "commit_lsn": format_lsn(row["_lsn"]), "seq": row["_seq"],
                       "snapshot": False},
            "schema_version": row["_schema_version"]}


def to_json(row: dict[str, Any]) -> str:
    """The row as ``DataFrame.toJSON`` writes it: null columns left out."""
    return orjson.dumps({name: value for name, value in row.items()
                         if value is not None}).decode()


@settings(max_examples=150, deadline=None)
@given(st.lists(state_rows(), max_size=12), st.integers(1, 5))
def test_events_equal_the_reference(rows: list[dict[str, Any]], batch_size: int) -> None:
    batches = list(event_batches(HISTORY, TOPIC, [to_json(row) for row in rows], batch_size))
    assert all(0 < len(batch) <= batch_size for batch in batches)
    events = [event for batch in batches for event in batch]
    assert len(events) == len(rows)
    for row, event in zip(rows, events, strict=True):
        expected = reference(row)
        assert event.event == expected
        assert list(event.event["after"] or {}) == list(expected["after"] or {})  # the order
        assert event.version == version_of(row["_lsn"], row["_seq"])
        message = event.message
        assert (message.topic, message.key, message.position) == (
            TOPIC, row["_key"].encode(), (row["_lsn"], row["_seq"]))
        assert message.tombstone is (row["_op"] == "d")
        assert message.value == orjson.dumps(expected)  # what the log would hand a sink


def test_text_columns_pass_as_they_are() -> None:
    passed = {c.name for c in HISTORY.all_columns() if passes_text(c)}
    assert passed == {"note"}  # not the key's int, a float, json, an array, a user type


def test_a_row_of_an_older_version_keeps_its_own_columns() -> None:
    row = {"id": "7", "note": "n", "score": "1.5", "doc": '{"a":1}', "flag": "true",
           "tags": "{x}", "_lsn": 1, "_seq": 0, "_key": '{"id":7}', "_op": "u",
           "_schema_version": 1}
    event = RowEvents(HISTORY, TOPIC).event(orjson.loads(to_json(row)))
    assert event.event["after"] == {"id": 7, "note": "n", "score": 1.5, "doc": {"a": 1},
                                    "flag": True}


def test_the_redis_sinks_native_renderer_takes_a_rebuilds_batches() -> None:
    rows = [{"id": str(n), "note": f"n{n}", "flag": "true", "doc": None, "_lsn": 100 + n,
             "_seq": 0, "_key": f'{{"id":{n}}}', "_op": "d" if n % 3 == 0 else "u",
             "_schema_version": 2} for n in range(1, 20)]
    [batch] = event_batches(HISTORY, TOPIC, [to_json(row) for row in rows], 100)
    config = RedisSinkConfig.model_validate({"url": "redis://h:6379/0",
                                             "key_template": "items:{key}"})
    native = NativeRows(KeyTemplates(config.key_template), set(), "app",
                        config.max_value_bytes)
    assert native.rows(batch, (0, 0, 0)) is not None  # not left to the Python loop
    assert isinstance(batch[0], SinkEvent)
