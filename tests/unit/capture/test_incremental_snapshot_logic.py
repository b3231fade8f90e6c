"""The pure parts of incremental snapshots: visibility, superseded keys, records, queries."""

from __future__ import annotations

import logging

import orjson
import pytest
from psycopg import sql

from cdc.capture.snapshot.chunks import ChunkKey, KeyColumn, chunk_query
from cdc.capture.snapshot.copy import _copy_field
from cdc.capture.snapshot.incremental_log import (
    TableSnapshot,
    known_tables,
    table_states,
    tables_record,
)
from cdc.capture.snapshot.watermarks import ALL_KEYS, KeyTracker, SnapshotXids, surviving


def test_snapshot_visibility() -> None:
    snapshot = SnapshotXids.parse("100:105:101,103")
    assert snapshot.visible(99) and snapshot.visible(100) and snapshot.visible(102)
    assert not snapshot.visible(101) and not snapshot.visible(103)
    assert not snapshot.visible(105) and not snapshot.visible(200)


def test_snapshot_visibility_across_xid_wraparound() -> None:
    epoch = 1 << 32  # pg_current_snapshot gives 64-bit xids; pgoutput 32-bit ones
    snapshot = SnapshotXids.parse(f"{epoch - 10}:{epoch + 5}:{epoch + 2}")
    assert snapshot.visible(0xFFFFFFFA)  # before the wrap
    assert snapshot.visible(1)  # after it, still below xmax
    assert not snapshot.visible(2)  # in progress
    assert not snapshot.visible(6)  # not started


def test_keys_of_invisible_transactions_are_superseded_until_visible() -> None:
    tracker = KeyTracker()
    tracker.add(10, b'{"id":1}')
    tracker.add(11, b'{"id":2}')
    tracker.add(11, b'{"id":3}')
    first = SnapshotXids.parse("11:12:11")  # 10 visible, 11 in progress
    assert tracker.superseded(first) == {b'{"id":2}', b'{"id":3}'}
    assert set(tracker.touched) == {11}, "visible transactions are forgotten"
    assert tracker.superseded(SnapshotXids.parse("12:12:")) == set()
    assert tracker.touched == {}


def test_surviving_rows() -> None:
    keys = [b"a", b"b", b"c"]
    assert surviving(keys, {b"b"}) == [0, 2]
    assert surviving(keys, set()) == [0, 1, 2]
    assert surviving(keys, {ALL_KEYS}) == [], "a truncate supersedes the whole chunk"


def test_table_snapshot_records_round_trip() -> None:
    state = TableSnapshot("public.orders", "running", "0/16B3748", 500, "region = 'eu'",
                          3, 1500, ["1500"])
    record = state.record("app")
    assert record.topic == "app._snapshots"
    value = orjson.loads(record.value)
    assert value["kind"] == "incremental"
    later = state.moved(state="completed", chunks=4)
    states = table_states([value, orjson.loads(later.record("app").value),
                           {"slot": "s", "state": "completed"}])
    assert states["public.orders"].state == "completed"
    assert states["public.orders"].chunks == 4 and states["public.orders"].last_key == ["1500"]
    assert not states["public.orders"].active


def test_known_tables() -> None:
    assert known_tables([]) is None
    first = orjson.loads(tables_record("app", {"public.a": 10}).value)
    second = orjson.loads(tables_record("app", {"public.a": 10, "public.b": 11}).value)
    assert known_tables([first, second]) == {"public.a": 10, "public.b": 11}


def test_copy_text_fields() -> None:
    assert _copy_field("\\N") is None
    assert _copy_field("a\\tb\\nc\\\\d") == "a\tb\nc\\d"
    assert _copy_field("plain") == "plain"


def test_chunk_query_is_keyset_paginated() -> None:
    key = ChunkKey((KeyColumn("region", "pg_catalog", "text"),
                    KeyColumn("n", "pg_catalog", "int4")), "things_pkey")
    query, params = chunk_query("public", "things", ("region", "n", "label"), key,
                                ("eu", "7"), "label LIKE 'x%'", 100)
    text = query.as_string(None)
    assert text == (
        'SELECT CASE WHEN "region" IS NULL THEN NULL ELSE format(\'%%s\', "region") END, '
        'CASE WHEN "n" IS NULL THEN NULL ELSE format(\'%%s\', "n") END, '
        'CASE WHEN "label" IS NULL THEN NULL ELSE format(\'%%s\', "label") END '
        'FROM "public"."things" WHERE '
        '("region", "n") > (CAST(%s AS "pg_catalog"."text"), CAST(%s AS "pg_catalog"."int4"))'
        " AND (label LIKE 'x%%') ORDER BY \"things\".\"region\", \"things\".\"n\" LIMIT 100")
    assert params == ["eu", "7"]
    first, none = chunk_query("public", "things", ("region",), key, None, None, 5)
    assert "WHERE" not in first.as_string(None) and none == []
    assert isinstance(first, sql.Composed)


def test_progress_is_logged_when_not_on_a_terminal(caplog: pytest.LogCaptureFixture) -> None:
    from cdc.capture.snapshot.progress import SnapshotProgress

    caplog.set_level(logging.INFO, logger="cdc.capture.snapshot.progress")
    with SnapshotProgress(interactive=False, log_every_s=0.0) as progress:
        progress.start("public.orders", 1000)
        progress.advance("public.orders", 250)
        progress.finish("public.orders")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("snapshot of public.orders: 250 rows of ~1000 (25%)")
    assert lines[-1].startswith("snapshot of public.orders: 250 rows in ")


def test_progress_draws_bars_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    from cdc.capture.snapshot.progress import SnapshotProgress

    with SnapshotProgress(interactive=True) as progress:
        progress.start("public.orders", 1000)
        progress.advance("public.orders", 250)
        assert progress._bars is not None  # rich, imported now that bars are drawn
        task = progress._bars.tasks[0]
        assert (task.description, task.completed, task.total) == ("public.orders", 250, 1000)
        progress.finish("public.orders")
        assert (task.completed, task.total) == (250, 250)
    assert progress._bars is None
    assert "public.orders" in capsys.readouterr().err
