"""What a rebuild task does with its rows, without Spark: the config it ships, the
batches it writes into its own sink, and the counts it hands back."""

from __future__ import annotations

import gc
import os
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from cdc.log import Message, Position
from connectors.contract import Rejection, Sink, SinkEvent, WriteResult
from connectors.opensearch.config import OpenSearchSinkConfig
from connectors.opensearch.sink import OpenSearchSink
from connectors.redis.config import RedisSinkConfig
from derived import apply_view
from spark_pipelines.cache_rebuild import CacheRecipe
from spark_pipelines.columns import Column, json_converter, json_value, table_columns
from spark_pipelines.search_tasks import KnownColumnTypes, SearchRecipe
from spark_pipelines.state import ReplayError, TableHistory
from spark_pipelines.task_writes import ShippedConfig, StateFeed, Targets, TaskCount, TaskCounts

SCHEMA = {"schema": "public", "table": "items", "schema_version": 1, "columns": [
    {"name": "id", "type": "pg_catalog.int8", "key": True},
    {"name": "name", "type": "pg_catalog.text"}, {"name": "flag", "type": "pg_catalog.bool"}]}


def state_row(key: int, op: str = "u", flag: bool = True) -> str:
    """A state row as ``DataFrame.toJSON`` gives it to a task."""
    return orjson.dumps({"id": str(key), "name": f"n{key}", "flag": "true" if flag else "false",
                         "_lsn": 100 + key, "_seq": 0,
                         "_key": f'{{"id":{key}}}' if op != "t" else "{}", "_op": op,
                         "_schema_version": 1}).decode()


@dataclass
class RecordingSink:
    refuse: set[int] = field(default_factory=set)
    batches: list[list[SinkEvent]] = field(default_factory=list)
    opened: int = 0
    closed: int = 0

    def open(self) -> None:
        self.opened += 1

    def write(self, batch: Sequence[SinkEvent]) -> WriteResult:
        self.batches.append(list(batch))
        return WriteResult([Rejection(e, "too big") for e in batch
                            if e.key.get("id") in self.refuse])

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed += 1


@dataclass
class RecordingRecipe:
    sink: RecordingSink

    def build(self) -> tuple[Sink, Targets]:
        return self.sink, lambda event: ("all",) if event.event["after"]["flag"] else ()


def event(body: dict[str, Any]) -> SinkEvent:
    return SinkEvent(Message("t", 0, 0, 0, b"", b"", Position(1, 0), False), body, 1)


def feed(sink: RecordingSink, batch_size: int = 2) -> StateFeed:
    return StateFeed(TableHistory(table_columns(SCHEMA)), "app.public.items", batch_size,
                     RecordingRecipe(sink))


def test_a_task_writes_its_rows_in_batches_and_counts_them() -> None:
    sink = RecordingSink()
    rows = [state_row(1), state_row(2, flag=False), state_row(3), state_row(4, op="d"),
            state_row(5)]
    [count] = feed(sink).write_partition(7, rows)
    assert [len(batch) for batch in sink.batches] == [2, 2, 1]
    assert sink.opened == sink.closed == 1
    first = sink.batches[0][0]
    assert first.event["after"] == {"id": 1, "name": "n1", "flag": True}
    assert first.event["op"] == "u" and first.version > 0
    assert (count.partition, count.rows, count.targets, count.deleted, count.rejected) == (
        7, 5, {"all": 3}, 1, 0)
    assert count.pid == os.getpid() and count.stage == -1  # no Spark task here


def test_an_empty_partition_opens_no_sink() -> None:
    sink = RecordingSink()
    [count] = feed(sink).write_partition(0, [])
    assert sink.opened == 0 and count.rows == 0


def test_a_refused_row_stops_the_task_and_fails_the_rebuild() -> None:
    sink = RecordingSink(refuse={3})
    [count] = feed(sink).write_partition(1, [state_row(k) for k in range(1, 7)])
    assert len(sink.batches) == 2 and sink.closed == 1
    assert count.rejected == 1 and count.example == "key {'id': 3}: too big"
    counts = TaskCounts((count, TaskCount(1, 0, 9, 1, 4, {"all": 4}, 0, 0)))
    with pytest.raises(ReplayError, match=r"OpenSearch refused 1 document\(s\) of "
                                          r"public.items, for example key \{'id': 3\}: too big"):
        counts.check("OpenSearch", "document(s)", "public.items")


def test_counts_add_up_over_tasks() -> None:
    counts = TaskCounts((TaskCount(3, 1, 11, 1, 4, {"a": 3}, 1, 0),
                         TaskCount(3, 0, 10, 1, 5, {"a": 5, "b": 1}, 0, 0),
                         TaskCount(3, 2, 12, 1, 0, {}, 0, 0)))
    assert (counts.rows, counts.total("a"), counts.total("b"), counts.deleted) == (9, 8, 1, 1)
    assert counts.describe() == "written by 2 tasks (5+4 rows)"
    counts.check("Redis", "write(s)", "public.items")


def test_configs_travel_as_their_values() -> None:
    search = OpenSearchSinkConfig.model_validate({
        "hosts": ["https://search:9200"], "index": "x_{table}", "username": "u",
        "password": "secret", "bulk_max_bytes": "1MB", "tombstone_retention": "2h",
        "views": [{"source": "public.items", "target": "flagged", "fields": ["id", "name"],
                   "rename": {"name": "title"}, "computed": {"label": "concat(name, '#', id)"},
                   "filter": "flag = true"}]})
    loaded = pickle.loads(pickle.dumps(ShippedConfig.of(search))).load()
    assert loaded.model_dump() == search.model_dump()
    assert loaded.password is not None and loaded.password.get_secret_value() == "secret"
    row = {"id": 1, "name": "a", "flag": True}
    assert apply_view(loaded.views[0], row) == {"id": 1, "title": "a", "label": "a#1"}
    cache = RedisSinkConfig.model_validate({"url": "redis://cache:6379/0", "ttl": "1h",
                                            "tombstone_retention": "forever"})
    assert pickle.loads(pickle.dumps(ShippedConfig.of(cache))).load() == cache


def test_recipes_pickle_and_count_per_alias() -> None:
    config = OpenSearchSinkConfig.model_validate({
        "hosts": ["http://search:9200"], "views": [
            {"source": "public.items", "target": "flagged_rebuild_1", "filter": "flag = true"},
            {"source": "public.items", "target": "all_rebuild_1"}]})
    recipe = SearchRecipe(ShippedConfig.of(config), "app",
                          KnownColumnTypes({"public.items": {"id": "pg_catalog.int8"}}),
                          (("flagged_rebuild_1", "flagged"), ("all_rebuild_1", "all")))
    sink, targets = pickle.loads(pickle.dumps(recipe)).build()
    assert isinstance(sink, OpenSearchSink)
    flagged, plain = (event({"after": {"id": 1, "flag": flag}}) for flag in (True, False))
    assert list(targets(flagged)) == ["flagged", "all"] and list(targets(plain)) == ["all"]
    assert recipe.column_types("public", "items", 1) == {"id": "pg_catalog.int8"}
    assert recipe.column_types("public", "other", 1) is None
    cache = CacheRecipe(ShippedConfig.of(RedisSinkConfig(url="redis://cache:6379/0")), "app")
    _, cache_targets = pickle.loads(pickle.dumps(cache)).build()
    assert list(cache_targets(event({"op": "r"}))) == ["written"]
    assert list(cache_targets(event({"op": "d"}))) == []



@pytest.mark.parametrize("type_name", [
    "pg_catalog.int2", "pg_catalog.int8", "pg_catalog.oid", "pg_catalog.bool",
    "pg_catalog.float4", "pg_catalog.float8", "pg_catalog.text", "pg_catalog.numeric",
    "pg_catalog.json", "pg_catalog.jsonb", "pg_catalog._int4", "pg_catalog.int4range",
    "public.mood", "public.address", "timestamptz"])
def test_converters_give_json_value(type_name: str) -> None:
    column = Column("c", type_name)
    convert = json_converter(column)
    texts = {"int2": ["0", "-12"], "int8": ["9007199254740993"], "oid": ["42"],
             "bool": ["true", "false"], "float4": ["1.5", "NaN"],
             "float8": ["-Infinity", "1e300"]}.get(type_name.split(".")[-1],
                                                  ["x", '{"a": [1]}', "[1,2]", "{1,2}",
                                                   "[1,5)", "{bad"])
    for text in [None, *texts]:
        assert convert(text) == json_value(column, text), (type_name, text)


@dataclass
class FreezeWatchingSink(RecordingSink):
    frozen: list[int] = field(default_factory=list)

    def write(self, batch: Sequence[SinkEvent]) -> WriteResult:
        self.frozen.append(gc.get_freeze_count())
        return super().write(batch)


def test_a_task_freezes_what_its_worker_held_and_puts_it_back() -> None:
    assert gc.get_freeze_count() == 0
    sink = FreezeWatchingSink()
    held = gc.get_count()[0] + len(gc.get_objects())
    [count] = feed(sink).write_partition(0, [state_row(k) for k in range(1, 6)])
    assert count.rows == 5 and len(sink.frozen) == 3
    assert all(frozen >= held // 2 for frozen in sink.frozen)  # the worker's objects
    assert gc.get_freeze_count() == 0  # back in the collector


def test_a_task_leaves_objects_someone_else_froze_alone() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        sink = FreezeWatchingSink()
        list(feed(sink).write_partition(0, [state_row(1)]))
        # Frozen objects still die when their last reference goes, so the count may only
        # fall a little: the task neither froze more nor unfroze what it found.
        assert len(sink.frozen) == 1 and frozen // 2 < sink.frozen[0] <= frozen
        assert frozen // 2 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_a_failing_task_puts_the_objects_back_too() -> None:
    class Broken(RecordingSink):
        def write(self, batch: Sequence[SinkEvent]) -> WriteResult:
            raise OSError("down")

    with pytest.raises(OSError, match="down"):
        list(feed(Broken()).write_partition(0, [state_row(1)]))
    assert gc.get_freeze_count() == 0
