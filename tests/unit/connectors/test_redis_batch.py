"""The Redis sink's batch script arguments: layout, calls per chunk, replies to rejections,
and the plain path giving the same rows as the general one."""

from __future__ import annotations

from typing import Any, cast

import pytest
from redis.commands.core import Script
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from connectors.changes import ChangeReader, Truncate
from connectors.contract import SinkRejectedError, SinkUnavailableError
from connectors.redis import RedisSinkConfig
from connectors.redis.batch import CHUNK_BYTES, CHUNK_ROWS, PackedBatch, ScriptBatch
from connectors.redis.keys import KeyTemplates
from connectors.redis.plain import PlainRows
from connectors.redis.rows import RowRenderer
from connectors.redis.scripts import version_text
from tests.unit.connectors.sink_events import TableEvents

TTLS = (0, 0, 604_800_000)


class FakeScript:
    """Records each call; answers with the queued replies (or raises a queued error)."""

    def __init__(self, *replies: Any) -> None:
        self.calls: list[tuple[list[Any], list[Any]]] = []
        self._replies = list(replies)

    def __call__(self, keys: list[Any], args: list[Any]) -> Any:
        self.calls.append((keys, args))
        reply = self._replies.pop(0) if self._replies else []
        if isinstance(reply, Exception):
            raise reply
        return reply


def run(batch: ScriptBatch, script: FakeScript) -> Any:
    return batch.run(cast(Script, script))


def test_rows_become_keys_and_arguments_in_order() -> None:
    orders, items = TableEvents(table="orders"), TableEvents(table="items")
    first, second, third = (orders.upsert({"id": 1}, 100), items.delete({"id": 2}, 101),
                            orders.upsert({"id": 3}, 102))
    batch = ScriptBatch(TTLS)
    batch.row(first, "orders:1", "_cdc_truncated:orders:*", "j", (b'{"id":1}',))
    batch.row(second, "items:2", "_cdc_truncated:items:*", "d")
    batch.row(third, "orders:3", "_cdc_truncated:orders:*", "h", (0, 2, "id", "3"))
    script = FakeScript()
    assert run(batch, script) == []
    [(keys, args)] = script.calls
    assert keys == ["_cdc_truncated:orders:*", "_cdc_truncated:items:*",
                    "orders:1", "_cdc_version:orders:1", "items:2", "_cdc_version:items:2",
                    "orders:3", "_cdc_version:orders:3"]
    assert args == [*TTLS, 2,
                    "j", 1, version_text(first.version), b'{"id":1}',
                    "d", 2, version_text(second.version),
                    "h", 1, version_text(third.version), 0, 2, "id", "3"]


def test_a_large_batch_is_split_into_calls_and_replies_name_the_right_rows() -> None:
    table = TableEvents()
    events = [table.upsert({"id": n}, 100, n) for n in range(CHUNK_ROWS * 2 + 1)]
    batch = ScriptBatch(TTLS)
    for number, event in enumerate(events):
        batch.row(event, f"orders:{number}", "_cdc_truncated:orders:*", "j", (b"{}",))
    assert len(batch) == len(events)
    script = FakeScript([], [2, b"WRONGTYPE Operation against a key"], [1, b"ERR other"])
    rejected = run(batch, script)
    assert [len(keys) for keys, _ in script.calls] == [1 + 2 * CHUNK_ROWS] * 2 + [1 + 2]
    assert [len(args) for _, args in script.calls] == [4 + 4 * CHUNK_ROWS] * 2 + [4 + 4]
    assert script.calls[1][0][1] == f"orders:{CHUNK_ROWS}"
    assert [r.event for r in rejected] == [events[CHUNK_ROWS + 1], events[2 * CHUNK_ROWS]]
    assert rejected[0].reason.startswith("Redis refused the write: WRONGTYPE")


def test_large_values_start_a_new_call() -> None:
    table = TableEvents()
    batch = ScriptBatch(TTLS)
    for number, size in enumerate([CHUNK_BYTES // 2, CHUNK_BYTES // 2, 1, CHUNK_BYTES + 1, 1]):
        batch.row(table.upsert({"id": number}, 100, number), f"orders:{number}", "m", "j",
                  (b"v",), size)
    script = FakeScript()
    run(batch, script)
    assert [keys[1::2] for keys, _ in script.calls] == [
        ["orders:0", "orders:1"], ["orders:2"], ["orders:3"], ["orders:4"]]


def test_a_key_already_in_the_call_starts_a_new_call() -> None:
    table = TableEvents()
    batch = ScriptBatch(TTLS)
    for number, key in enumerate(["orders:1", "orders:2", "orders:1", "orders:3",
                                  "_cdc_version:orders:3", "orders:2"]):
        batch.row(table.upsert({"id": number}, 100, number), key, "m", "j", (b"v",))
    script = FakeScript()
    run(batch, script)
    assert [keys[1::2] for keys, _ in script.calls] == [
        ["orders:1", "orders:2"], ["orders:1", "orders:3"], ["_cdc_version:orders:3",
                                                             "orders:2"]]


def test_a_moved_version_retries_the_batch() -> None:
    batch = ScriptBatch(TTLS)
    batch.row(TableEvents().upsert({"id": 1}, 100), "orders:1", "m", "J", ("none", b"{}"))
    with pytest.raises(SinkUnavailableError, match="changed between reading and writing"):
        run(batch, FakeScript([1, b"MOVED"]))


@pytest.mark.parametrize(("error", "raised"), [
    (ResponseError("OOM command not allowed when used memory > 'maxmemory'"),
     SinkUnavailableError),
    (ResponseError("BUSY Redis is busy running a script"), SinkUnavailableError),
    (RedisConnectionError("Connection refused"), SinkUnavailableError),
    (ResponseError("ERR user_script:1: something unexpected"), SinkRejectedError),
])
def test_a_failed_call_is_transient_or_refused(error: Exception,
                                                raised: type[Exception]) -> None:
    batch = ScriptBatch(TTLS)
    batch.row(TableEvents().upsert({"id": 1}, 100), "orders:1", "m", "j", (b"{}",))
    with pytest.raises(raised):
        run(batch, FakeScript(error))


def test_an_empty_batch_makes_no_call() -> None:
    script = FakeScript()
    assert run(ScriptBatch(TTLS), script) == []
    assert script.calls == []


def general_rows(config: RedisSinkConfig, events: list[Any]) -> ScriptBatch:
    """The rows the sink's general path (``ChangeReader`` and ``RowRenderer``) makes."""
    changes, rejected = ChangeReader(config.views, "app").read(events)
    assert rejected == []
    batch = ScriptBatch(TTLS)
    renderer = RowRenderer(config, KeyTemplates(config.key_template))
    for change in changes:
        assert not isinstance(change, Truncate)
        assert renderer.add(batch, change, {}) is None
    return batch


def calls_of(batch: ScriptBatch | None) -> list[tuple[list[Any], list[Any]]]:
    assert batch is not None
    script = FakeScript()
    run(batch, script)
    return script.calls


def test_a_plain_batch_gets_the_same_rows_on_both_paths() -> None:
    config = RedisSinkConfig.model_validate({"url": "redis://h:6379/0",
                                             "key_template": "{schema}.{table}:{key}"})
    orders, lines = TableEvents(table="orders"), TableEvents(schema="s", table="lines")
    events = [orders.upsert({"id": 1, "n": 2**62, "t": "é", "j": {"a": [1]}}, 100, op="c"),
              lines.upsert({"o": "a:b", "l": 1, "x": None}, 101, key=("o", "l")),
              orders.delete({"id": 2}, 102), orders.upsert({"id": 3}, 103, op="r"),
              lines.delete({"o": "7", "l": 2}, 104)]
    plain = PlainRows(config, KeyTemplates(config.key_template), "app",
                      native=False).rows(events, TTLS)
    assert isinstance(plain, ScriptBatch)
    assert calls_of(plain) == calls_of(general_rows(config, events))


def test_a_view_passing_rows_as_they_are_gets_the_same_rows_on_both_paths() -> None:
    """A joined view's records reach the sink through such a view: written as plain rows."""
    config = RedisSinkConfig.model_validate({
        "url": "redis://h:6379/0", "key_template": "{table}:{key}",
        "views": [{"source": "public.orders", "target": "orders"}]})
    orders = TableEvents(table="orders")
    events = [orders.upsert({"id": 1, "customer": {"name": "a"}, "items": [{"l": 0}]}, 100),
              orders.delete({"id": 2}, 101)]
    plain = PlainRows(config, KeyTemplates(config.key_template), "app",
                      native=False).rows(events, TTLS)
    assert isinstance(plain, ScriptBatch)
    assert calls_of(plain) == calls_of(general_rows(config, events))
    rendered = PlainRows(config, KeyTemplates(config.key_template), "app").rows(events, TTLS)
    assert isinstance(rendered, PackedBatch)  # the native renderer took it


@pytest.mark.parametrize("settings", [{"value_format": "hash"}, {"mode": "invalidate"},
                                      {"views": [{"source": "public.orders",
                                                  "target": "orders", "exclude": ["n"]}]},
                                      {"views": [{"source": "public.orders", "target": "orders",
                                                  "key_template": "o:{key.id}"}]},
                                      {"max_value_bytes": 10}])
def test_other_settings_take_the_general_path(settings: dict[str, Any]) -> None:
    config = RedisSinkConfig.model_validate({"url": "redis://h:6379/0", **settings})
    events = [TableEvents().upsert({"id": 1, "title": "a longer title"}, 100)]
    assert PlainRows(config, KeyTemplates(config.key_template), "app").rows(events, TTLS) is None


@pytest.mark.parametrize("odd", [
    TableEvents().truncate(100), TableEvents().upsert({"id": 1}, 100, unchanged=["body"]),
    TableEvents().event("m", {}, 100), TableEvents().event("u", {"id": 1}, 100),
    TableEvents().event("d", {}, 100), TableEvents().event("x", {"id": 1}, 100)])
def test_an_event_that_is_not_plain_takes_the_general_path(odd: Any) -> None:
    config = RedisSinkConfig.model_validate({"url": "redis://h:6379/0"})
    events = [TableEvents().upsert({"id": 2}, 99), odd]
    assert PlainRows(config, KeyTemplates(config.key_template), "app").rows(events, TTLS) is None
