"""The Redis sink against a real Redis: versioned CAS, tombstones, truncates, TOAST, TTL."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson
import pytest
import redis

from connectors.contract import SinkEvent, SinkUnavailableError, WriteResult
from connectors.redis import RedisSinkConfig
from connectors.redis.batch import CHUNK_ROWS
from connectors.redis.scripts import BATCH, BATCH_CLUSTER, version_text
from connectors.redis.sink import RedisSink
from connectors.redis.truncate import SCAN_COUNT
from tests.unit.connectors.sink_events import TableEvents

pytestmark = pytest.mark.integration

SinkMaker = Callable[..., RedisSink]
RedisClient = Any  # redis.Redis: its stubs type every reply as "Awaitable | value"
BIG_LSN = 1 << 50  # versions past 2^60: Lua doubles could not tell them apart


@pytest.fixture
def client(redis_url: str, unique_name: str) -> Iterator[RedisClient]:
    """A client; the test's keys (containing ``unique_name``) are deleted afterwards."""
    redis_client = redis.Redis.from_url(redis_url)
    yield redis_client
    doomed = list(redis_client.scan_iter(match=f"*{unique_name}*", count=1000))
    if doomed:
        redis_client.unlink(*doomed)
    redis_client.close()


@pytest.fixture
def make_sink(redis_url: str, client: RedisClient) -> Iterator[SinkMaker]:
    """Opens sinks on the test Redis (settings as keyword arguments); closes them after."""
    opened: list[RedisSink] = []

    def make(**settings: Any) -> RedisSink:
        config = RedisSinkConfig.model_validate({"url": redis_url,
                                                 "key_template": "{table}:{key}", **settings})
        sink = RedisSink(config)
        sink.open()
        opened.append(sink)
        return sink

    yield make
    for sink in opened:
        sink.close()


@pytest.fixture
def table(unique_name: str) -> TableEvents:
    return TableEvents(table=unique_name)


def written(sink: RedisSink, batch: list[SinkEvent]) -> WriteResult:
    result = sink.write(batch)
    assert result.rejected == [], [r.reason for r in result.rejected]
    return result


def values(client: RedisClient, table: TableEvents) -> dict[str, Any]:
    """Every value key of the table: JSON decoded, hashes as dicts of text."""
    found: dict[str, Any] = {}
    for raw in client.scan_iter(match=f"{table.table}:*", count=1000):
        key = raw.decode()
        if client.type(raw) == b"hash":
            found[key] = {k.decode(): v.decode() for k, v in client.hgetall(raw).items()}
        else:
            found[key] = orjson.loads(client.get(raw) or b"null")
    return found


def stored_version(client: RedisClient, key: str) -> int | None:
    raw = client.get(f"_cdc_version:{key}")
    return int(raw) if raw is not None else None


def test_json_upserts_and_deletes(make_sink: SinkMaker, client: RedisClient,
                                  table: TableEvents) -> None:
    sink = make_sink()
    name = table.table
    written(sink, [table.upsert({"id": 1, "title": "one", "n": 2**62, "price": "1.10",
                                 "meta": {"a": [1]}}, 100, op="c"),
                   table.upsert({"id": 2, "title": "two"}, 100, 1, op="c")])
    written(sink, [table.delete({"id": 2}, 200)])
    assert values(client, table) == {f"{name}:1": {"id": 1, "title": "one", "n": 2**62,
                                                   "price": "1.10", "meta": {"a": [1]}}}
    assert stored_version(client, f"{name}:1") == 100 << 10
    assert stored_version(client, f"{name}:2") == 200 << 10  # the tombstone
    tombstone_ms = client.pttl(f"_cdc_version:{name}:2")
    assert 0 < tombstone_ms <= 7 * 24 * 3600 * 1000
    assert client.pttl(f"_cdc_version:{name}:1") == -1  # lives as long as the value


def test_replaying_older_batches_changes_nothing(make_sink: SinkMaker, client: RedisClient,
                                                 table: TableEvents) -> None:
    sink = make_sink()
    older = [table.upsert({"id": 1, "v": "old"}, BIG_LSN, 1),
             table.upsert({"id": 2, "v": "old"}, BIG_LSN, 2)]
    newer = [table.upsert({"id": 1, "v": "new"}, BIG_LSN, 3), table.delete({"id": 2}, BIG_LSN, 4)]
    written(sink, older)
    written(sink, newer)
    state = values(client, table)
    written(sink, older)  # 2^60+1 < 2^60+3: stale, and the deleted row stays deleted
    assert values(client, table) == state == {f"{table.table}:1": {"id": 1, "v": "new"}}


def test_the_same_batch_twice_is_idempotent(make_sink: SinkMaker, client: RedisClient,
                                             table: TableEvents) -> None:
    sink = make_sink()
    batch = [table.upsert({"id": n, "n": n}, 100 + n) for n in range(20)] + [
        table.delete({"id": 3}, 500)]
    written(sink, batch)
    first = values(client, table)
    written(sink, batch)
    assert values(client, table) == first
    assert len(first) == 19


def test_truncate_deletes_the_tables_keys_in_batches(make_sink: SinkMaker, client: RedisClient,
                                                     table: TableEvents,
                                                     unique_name: str) -> None:
    sink = make_sink()
    rows = 2 * SCAN_COUNT + 500
    before = [table.upsert({"id": n}, 100, n) for n in range(rows)]
    written(sink, before)
    other = TableEvents(table=f"{unique_name}_other")
    written(sink, [other.upsert({"id": 1}, 100)])
    truncating = [table.truncate(200), table.upsert({"id": 1, "after": True}, 200, 1)]
    written(sink, truncating)
    assert values(client, table) == {f"{table.table}:1": {"id": 1, "after": True}}
    assert client.exists(f"{other.table}:1") == 1  # another table's keys stay
    versions = list(client.scan_iter(match=f"_cdc_version:{table.table}:*", count=1000))
    assert versions == [f"_cdc_version:{table.table}:1".encode()]  # the others went too

    written(sink, before)  # older than the truncate: refused by the marker
    written(sink, truncating)  # the truncate again: done already, nothing is deleted
    assert values(client, table) == {f"{table.table}:1": {"id": 1, "after": True}}


def test_an_interrupted_truncate_runs_again(make_sink: SinkMaker, client: RedisClient,
                                            table: TableEvents) -> None:
    sink = make_sink()
    written(sink, [table.upsert({"id": n}, 100, n) for n in range(5)])
    marker = f"_cdc_truncated:{table.table}:*"
    client.hset(marker, mapping={"version": version_text(200 << 10), "done": "0"})
    written(sink, [table.truncate(200)])
    assert values(client, table) == {}
    assert client.hget(marker, "done") == b"1"


def test_unchanged_toast_columns_json(make_sink: SinkMaker, client: RedisClient,
                                      table: TableEvents) -> None:
    sink = make_sink()
    key = f"{table.table}:1"
    written(sink, [table.upsert({"id": 1, "title": "a", "body": "x" * 10_000,
                                 "doc": {"big": 2**62 + 1, "f": 0.1234567890123456789}}, 100)])
    written(sink, [table.upsert({"id": 1, "title": "b"}, 200, unchanged=["body", "doc"])])
    assert values(client, table)[key] == {"id": 1, "title": "b", "body": "x" * 10_000,
                                          "doc": {"big": 2**62 + 1, "f": 0.1234567890123456789}}
    written(sink, [table.upsert({"id": 1, "title": "old"}, 150, unchanged=["body"])])
    assert values(client, table)[key]["title"] == "b"


def test_unchanged_toast_columns_hash(make_sink: SinkMaker, client: RedisClient,
                                      table: TableEvents) -> None:
    sink = make_sink(value_format="hash", views=[{
        "source": f"public.{table.table}", "target": "orders", "exclude": ["secret"],
        "computed": {"size": "length(body)"}}])
    key = f"{table.table}:1"
    written(sink, [table.upsert({"id": 1, "title": "a", "body": "long", "note": None,
                                 "secret": "s", "ok": True}, 100)])
    assert values(client, table)[key] == {"id": "1", "title": "a", "body": "long",
                                          "ok": "true", "size": "4"}
    written(sink, [table.upsert({"id": 1, "title": "b", "ok": False}, 200, unchanged=["body"])])
    assert values(client, table)[key] == {"id": "1", "title": "b", "body": "long",
                                          "ok": "false", "size": "4"}


def test_hash_format_filters_and_ttl(make_sink: SinkMaker, client: RedisClient,
                                     table: TableEvents) -> None:
    sink = make_sink(value_format="hash", ttl="1h", tombstone_retention="1d", views=[{
        "source": f"public.{table.table}", "target": "paid", "fields": ["id", "total"],
        "filter": "status = 'paid'", "key_template": "{table}:paid:{key.id}"}])
    key = f"{table.table}:paid:1"
    written(sink, [table.upsert({"id": 1, "status": "paid", "total": "9.99"}, 100)])
    assert client.hgetall(key) == {b"id": b"1", b"total": b"9.99"}
    assert 3_500_000 < client.pttl(key) <= 3_600_000
    version_ttl = client.pttl(f"_cdc_version:{key}")
    assert 3_600_000 + 86_000_000 < version_ttl <= 3_600_000 + 86_400_000  # outlives the value
    written(sink, [table.upsert({"id": 1, "status": "void", "total": "9.99"}, 200)])
    assert client.exists(key) == 0
    assert 86_000_000 < client.pttl(f"_cdc_version:{key}") <= 86_400_000


def test_json_ttl_expires_values_and_versions_later(make_sink: SinkMaker, client: RedisClient,
                                                   table: TableEvents) -> None:
    sink = make_sink(ttl="1h", tombstone_retention="1d")
    name = table.table
    written(sink, [table.upsert({"id": 1, "v": "a"}, 100), table.upsert({"id": 2}, 100, 1),
                   table.delete({"id": 2}, 200)])
    assert values(client, table) == {f"{name}:1": {"id": 1, "v": "a"}}
    assert 3_500_000 < client.pttl(f"{name}:1") <= 3_600_000
    assert 3_600_000 + 86_000_000 < client.pttl(f"_cdc_version:{name}:1") \
        <= 3_600_000 + 86_400_000
    assert 86_000_000 < client.pttl(f"_cdc_version:{name}:2") <= 86_400_000


def test_one_batch_of_several_tables_checks_each_tables_truncate(
        make_sink: SinkMaker, client: RedisClient, unique_name: str) -> None:
    sink = make_sink()
    first, second = TableEvents(table=f"{unique_name}_a"), TableEvents(table=f"{unique_name}_b")
    written(sink, [second.truncate(300)])
    written(sink, [first.upsert({"id": 1}, 200), second.upsert({"id": 1}, 200, 1),
                   first.upsert({"id": 2}, 200, 2), second.upsert({"id": 2}, 400)])
    assert values(client, first) == {f"{first.table}:1": {"id": 1}, f"{first.table}:2": {"id": 2}}
    assert values(client, second) == {f"{second.table}:2": {"id": 2}}  # 200 < the truncate


def test_composite_keys_and_key_columns(make_sink: SinkMaker, client: RedisClient,
                                        table: TableEvents) -> None:
    name = table.table
    sink = make_sink()
    lines = make_sink(key_template="{table}:line:{key.line}:{key.order_id}")
    key = ("order_id", "line")
    batch = [table.upsert({"order_id": "a:b", "line": 1}, 100, key=key),
             table.upsert({"order_id": "7", "line": 2}, 100, 1, key=key)]
    written(sink, batch)
    written(lines, batch)
    assert set(values(client, table)) == {f"{name}:a\\:b:1", f"{name}:7:2",
                                          f"{name}:line:1:a:b", f"{name}:line:2:7"}


def test_invalidate_mode_deletes_changed_keys(make_sink: SinkMaker, client: RedisClient,
                                              table: TableEvents) -> None:
    for n in (1, 2, 3):
        client.set(f"{table.table}:{n}", b'"cached"')
    written(make_sink(mode="invalidate"),
            [table.upsert({"id": 1}, 100), table.delete({"id": 2}, 100, 1)])
    assert sorted(values(client, table)) == [f"{table.table}:3"]
    assert client.exists(f"_cdc_version:{table.table}:1") == 0


def test_a_wrong_type_rejects_only_its_event(make_sink: SinkMaker, client: RedisClient,
                                             table: TableEvents) -> None:
    sink = make_sink(value_format="hash")
    client.rpush(f"{table.table}:1", "not a hash")
    bad = table.upsert({"id": 1, "title": "t"}, 100, unchanged=["body"])
    result = sink.write([bad, table.upsert({"id": 2, "title": "u"}, 100, 1)])
    assert [r.event for r in result.rejected] == [bad]
    assert "WRONGTYPE" in result.rejected[0].reason
    assert client.hgetall(f"{table.table}:2") == {b"id": b"2", b"title": b"u"}
    assert stored_version(client, f"{table.table}:1") is None  # nothing half-written


def test_json_merge_over_a_foreign_value_rejects_its_event(
        make_sink: SinkMaker, client: RedisClient, table: TableEvents) -> None:
    sink = make_sink()
    client.rpush(f"{table.table}:1", "a list")
    client.set(f"{table.table}:2", "not json")
    first = table.upsert({"id": 1, "title": "t"}, 100, unchanged=["body"])
    second = table.upsert({"id": 2, "title": "t"}, 100, 1, unchanged=["body"])
    result = sink.write([first, second, table.upsert({"id": 3}, 100, 2)])
    assert [r.event for r in result.rejected] == [first, second]
    assert "WRONGTYPE" in result.rejected[0].reason
    assert "is not JSON" in result.rejected[1].reason
    assert orjson.loads(client.get(f"{table.table}:3")) == {"id": 3}


def test_scripts_are_reloaded_after_a_flush(make_sink: SinkMaker, client: RedisClient,
                                            table: TableEvents) -> None:
    sink = make_sink()
    written(sink, [table.upsert({"id": 1}, 100)])
    client.script_flush()
    written(sink, [table.upsert({"id": 1, "again": True}, 200)])
    assert values(client, table) == {f"{table.table}:1": {"id": 1, "again": True}}


Row = tuple[str, int, tuple[bytes | str, ...]]


def script_call(client: RedisClient, cluster: bool, marker: str
                ) -> Callable[[str, Sequence[Row]], list[Any]]:
    """Calls of the batch script writing rows of one key; ``cluster``: the cluster's
    script, its keys passed undeclared (as on a master of a cluster)."""
    script = client.register_script(BATCH_CLUSTER if cluster else BATCH)

    def call(key: str, rows: Sequence[Row]) -> list[Any]:
        keys = [marker] + [k for _ in rows for k in (key, f"_cdc_version:{key}")]
        args: list[Any] = [0, 0, 0, 1]
        for kind, version, extra in rows:
            args += [kind, 1, version_text(version), *extra]
        if cluster:
            return list(script(keys=[], args=[len(keys), *keys, *args]))
        return list(script(keys=keys, args=args))
    return call


@pytest.mark.parametrize("cluster", [False, True], ids=["one-node", "cluster-script"])
def test_the_batch_script_checks_each_rows_version(client: RedisClient, unique_name: str,
                                                   cluster: bool) -> None:
    marker, key = f"_cdc_truncated:{unique_name}:*", f"{unique_name}:1"
    client.set(f"_cdc_version:{key}", version_text(5))
    script = script_call(client, cluster, marker)

    def call(*rows: Row) -> list[Any]:
        return script(key, rows)

    assert call(("J", 9, (version_text(4), b'{"v":1}'))) == [1, b"MOVED"]
    assert client.get(key) is None
    assert call(("J", 9, (version_text(5), b'{"v":2}'))) == []
    assert call(("j", 8, (b'{"v":3}',))) == []  # stale: not written, not reported
    assert client.get(key) == b'{"v":2}'
    assert call(("j", 9, (b'{"v":4}',)), ("d", 10, ()), ("j", 9, (b'{"v":5}',))) == []
    assert client.get(key) is None  # the equal version was rewritten, then deleted
    assert client.get(f"_cdc_version:{key}") == version_text(10).encode()
    client.hset(marker, "version", version_text(20))
    assert call(("j", 15, (b'{"v":6}',))) == []  # older than the truncate
    assert client.get(key) is None
    foreign = f"{unique_name}:2"
    client.rpush(f"_cdc_version:{foreign}", "not a version")
    [row, reason] = script(foreign, [("j", 30, (b'{"v":7}',))])
    assert row == 1 and reason.startswith(b"WRONGTYPE")


def test_a_batch_larger_than_one_call_is_written_whole(make_sink: SinkMaker,
                                                       client: RedisClient,
                                                       table: TableEvents) -> None:
    sink = make_sink()
    rows = CHUNK_ROWS * 2 + 7
    written(sink, [table.upsert({"id": n}, 100, n) for n in range(rows)])
    assert len(values(client, table)) == rows
    bad = table.upsert({"id": rows + 1, "t": "x"}, 100, rows + 1, unchanged=["body"])
    client.rpush(f"{table.table}:{rows + 1}", "a list")
    result = sink.write([table.delete({"id": n}, 200, n) for n in range(CHUNK_ROWS + 3)]
                        + [bad])
    assert [r.event for r in result.rejected] == [bad]
    left = set(client.scan_iter(match=f"{table.table}:*", count=1000))
    assert len(left) == rows - CHUNK_ROWS - 3 + 1  # and the list stays
    assert f"{table.table}:{rows + 1}".encode() in left


def test_an_unreachable_redis_is_transient() -> None:
    config = RedisSinkConfig.model_validate({"url": "redis://127.0.0.1:9/0", "timeout": "1s"})
    with pytest.raises(SinkUnavailableError, match="Redis failed while connecting"):
        RedisSink(config).open()


def test_a_foreign_version_key_rejects_only_its_event(make_sink: SinkMaker,
                                                      client: RedisClient,
                                                      table: TableEvents) -> None:
    """The script reads every version in one MGET, which answers nothing for a key of
    another type; GET refuses it (WRONGTYPE), and so does the script, for that row."""
    sink = make_sink()
    client.rpush(f"_cdc_version:{table.table}:1", "not a version")
    bad = table.upsert({"id": 1, "title": "t"}, 100)
    result = sink.write([bad, table.upsert({"id": 2, "title": "u"}, 100, 1),
                         table.delete({"id": 3}, 100, 2)])
    assert [r.event for r in result.rejected] == [bad]
    assert "WRONGTYPE" in result.rejected[0].reason
    assert values(client, table) == {f"{table.table}:2": {"id": 2, "title": "u"}}
    assert client.exists(f"{table.table}:1") == 0
    assert stored_version(client, f"{table.table}:3") is not None  # its tombstone


def test_rows_of_one_key_in_one_batch_land_in_order(make_sink: SinkMaker,
                                                    client: RedisClient,
                                                    table: TableEvents) -> None:
    """Two tables whose keys meet: their rows of one key go in separate calls, in order."""
    other = TableEvents(table=f"{table.table}_b")
    sink = make_sink(key_template="shared:{key}")
    written(sink, [table.upsert({"id": 1, "v": "a"}, 100), other.upsert({"id": 1, "v": "b"},
                                                                         101),
                   table.upsert({"id": 2, "v": "c"}, 102), other.delete({"id": 2}, 103),
                   other.upsert({"id": 3, "v": "d"}, 99), table.upsert({"id": 3, "v": "e"},
                                                                       98)])
    assert orjson.loads(client.get("shared:1")) == {"id": 1, "v": "b"}
    assert client.get("shared:2") is None
    assert orjson.loads(client.get("shared:3")) == {"id": 3, "v": "d"}  # the newer one
    client.delete(*[k for k in client.keys("*shared:*")])
