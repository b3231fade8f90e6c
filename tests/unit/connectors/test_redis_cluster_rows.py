"""The Redis sink on a Redis Cluster: seed-node settings, the sink's own keys named into
each row's hash slot, and a batch split into one script call per master (or, after a
slot moved, per slot), in rounds that keep each slot's order."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from redis.crc import key_slot
from redis.exceptions import (
    ClusterDownError,
    ConnectionError,
    MovedError,
    NoScriptError,
    ResponseError,
)

from cdc.errors import ConfigError
from connectors.contract import SinkRejectedError, SinkUnavailableError
from connectors.redis import RedisSinkConfig
from connectors.redis.cluster_batch import ClusterRows, SlotsMovedError
from connectors.redis.sink import RedisSink
from connectors.redis.slots import KeyNames, slot_marker, slot_of, slot_tags
from tests.unit.connectors.sink_events import TableEvents

TTLS = (0, 0, 604_800_000)
MARKER = "_cdc_truncated:orders:*"


def problems(settings: dict[str, Any]) -> dict[tuple[Any, ...], tuple[str, Any]]:
    with pytest.raises(ValidationError) as caught:
        RedisSinkConfig.model_validate(settings)
    return {tuple(e["loc"]): (e["msg"], e["input"]) for e in caught.value.errors()}


def test_urls_name_a_cluster_and_url_one_redis() -> None:
    cluster = RedisSinkConfig.model_validate({"urls": ["redis://a:7000", "redis://b:7001/0"]})
    assert cluster.cluster and cluster.seeds == ("redis://a:7000", "redis://b:7001/0")
    single = RedisSinkConfig.model_validate({"url": "redis://a:6379/0"})
    assert not single.cluster and single.seeds == ("redis://a:6379/0",)


@pytest.mark.parametrize(("settings", "loc", "words", "shown"), [
    ({"url": "redis://h/0", "urls": ["redis://a:1"]}, ("urls",), "not both", ["redis://a:1"]),
    ({}, ("url",), "urls: [redis://host:7000", None),
    ({"urls": ["unix:///run/redis.sock"]}, ("urls", 0), "over TCP", "unix:///run/redis.sock"),
    ({"urls": ["redis://a:1", "redis://u:secret@b:2/3"]}, ("urls", 1), "only database 0",
     "redis://u:***@b:2/3"),
])
def test_bad_addresses_name_the_field_the_value_and_the_fix(
        settings: dict[str, Any], loc: tuple[Any, ...], words: str, shown: Any) -> None:
    message, value = problems(settings)[loc]
    assert words in message
    assert value == shown


@pytest.mark.parametrize("key", ["orders:42", "{user:1}:orders", "a}b{", "x{}y{z}", "é:1"])
def test_the_version_key_and_marker_share_the_row_s_slot(key: str) -> None:
    names = KeyNames(cluster=True)
    slot = key_slot(key.encode())
    assert key_slot(names.version_key(key).encode()) == slot
    assert key_slot(names.marker(MARKER, key).encode()) == slot
    assert names.version_key(key).startswith(names.version_prefix(slot))
    assert KeyNames(cluster=False).version_key(key) == "_cdc_version:" + key


def test_every_slot_has_a_tag() -> None:
    tags = slot_tags()
    assert len(tags) == 16384
    assert all(key_slot(tag.encode()) == slot for slot, tag in enumerate(tags))


def master_of(slot: int) -> int:
    """Three masters, by slot number (a fake slot map)."""
    return slot % 3


def test_a_batch_becomes_one_call_per_master_in_rounds() -> None:
    orders = TableEvents(table="orders")
    batch = ClusterRows(TTLS)
    keys = [f"orders:{n}" for n in range(50)] + ["orders:7"]  # orders:7 twice
    events = [orders.upsert({"id": n}, 100 + n) for n in range(len(keys))]
    for event, key in zip(events, keys, strict=True):
        batch.row(event, key, MARKER, "j", (b"{}",))
    assert len(batch) == len(keys)
    first, second = batch.rounds(master_of)
    assert len(first) == 3
    assert [call_events for _, _, call_events in second] == [[events[-1]]]
    names = KeyNames(cluster=True)
    for calls in (first, second):
        for call_keys, args, call_events in calls:
            markers = int(args[3])
            row_keys = call_keys[markers:]
            assert len(row_keys) == 2 * len(call_events)
            assert len({master_of(slot_of(key)) for key in call_keys}) == 1  # one master
            # every row's marker is in its slot (a call carries all its master's markers)
            assert {slot_of(k) for k in row_keys} <= {slot_of(k) for k in call_keys[:markers]}
            for key, version_key in zip(row_keys[::2], row_keys[1::2], strict=True):
                assert version_key == names.version_key(key)
            for marker in call_keys[:markers]:
                assert marker == slot_marker(MARKER, slot_of(marker))
    written = [event for calls in (first, second) for _, _, es in calls for event in es]
    assert sorted(written, key=events.index) == events


def test_by_slot_a_call_holds_the_keys_of_one_slot() -> None:
    orders = TableEvents(table="orders")
    batch = ClusterRows(TTLS)
    keys = [f"orders:{n}" for n in range(30)]
    for n, key in enumerate(keys):
        batch.row(orders.upsert({"id": n}, 100 + n), key, MARKER, "j", (b"{}",))
    [calls] = batch.rounds(lambda slot: slot)
    assert len(calls) == len({slot_of(key) for key in keys})
    for call_keys, _, _ in calls:
        assert len({key_slot(k.encode()) for k in call_keys}) == 1


class FakeNode:
    def __init__(self, name: int) -> None:
        self.name = name


class FakeCluster:
    """A cluster client whose pipelines answer with queued replies (one list per
    ``execute``); ``script_load`` counts the loads. Its masters: ``master_of``."""

    def __init__(self, *answers: list[Any]) -> None:
        self.answers = list(answers)
        self.sent: list[list[tuple[Any, ...]]] = []
        self.loads = 0
        self.nodes_manager = type("Nodes", (), {"slots_cache": {
            slot: [FakeNode(master_of(slot))] for slot in range(16384)}})()

    def pipeline(self, transaction: bool) -> FakeCluster:
        self.sent.append([])
        return self

    def execute_command(self, *args: Any, target_nodes: Any) -> None:
        assert args[0] == "EVALSHA"
        declared = args[2]
        keys = args[3:3 + declared] if declared else args[4:4 + args[3]]
        assert target_nodes == master_of(slot_of(keys[-1]))
        assert len({master_of(slot_of(key)) for key in keys}) == 1
        self.sent[-1].append(args)

    def get_node_from_key(self, key: str) -> int:
        return master_of(slot_of(key))

    def execute(self, raise_on_error: bool) -> list[Any]:
        return self.answers.pop(0)

    def script_load(self, script: str) -> str:
        self.loads += 1
        return "sha"


def cluster_rows(rows: int) -> tuple[ClusterRows, list[Any]]:
    orders = TableEvents(table="orders")
    batch = ClusterRows(TTLS)
    events = [orders.upsert({"id": n}, 100 + n) for n in range(rows)]
    for n, event in enumerate(events):
        batch.row(event, f"orders:{n}", MARKER, "j", (b"{}",))
    return batch, events


def script_of(client: FakeCluster) -> Any:
    return type("FakeScript", (), {"registered_client": client, "sha": "sha",
                                   "script": "return 1"})()


def test_a_round_is_one_pipeline_and_a_lost_script_is_loaded_again() -> None:
    batch, events = cluster_rows(30)  # every master holds some
    client = FakeCluster([[], NoScriptError("NOSCRIPT"), [1, b"WRONGTYPE no"]], [[]])
    rejected = batch.run(script_of(client))
    assert [len(sent) for sent in client.sent] == [3, 1] and client.loads == 1
    assert all(args[2] == 0 for args in client.sent[0])  # keys passed undeclared
    [rejection] = rejected
    assert rejection.event in events and "WRONGTYPE" in rejection.reason


def test_by_slot_the_keys_are_declared() -> None:
    batch, _ = cluster_rows(3)  # orders:0, 1, 2: three slots
    batch.by_slot = True
    client = FakeCluster([[], [], []])
    assert batch.run(script_of(client)) == []
    assert [args[2] for args in client.sent[0]] == [3, 3, 3]  # a marker, a row's two keys


@pytest.mark.parametrize(("reply", "raised"), [
    (ConnectionError("gone"), SinkUnavailableError),
    (ClusterDownError("CLUSTERDOWN The cluster is down"), SinkUnavailableError),
    (MovedError("3999 127.0.0.1:6381"), SinkUnavailableError),
    (ResponseError("Script attempted to access a non local key in a cluster node script"),
     SlotsMovedError),
    (ResponseError("ERR something else"), SinkRejectedError),
])
def test_a_failed_call_fails_the_batch(reply: Exception, raised: type[Exception]) -> None:
    batch, _ = cluster_rows(30)
    with pytest.raises(raised):
        batch.run(script_of(FakeCluster([[], reply, []])))


class OldRedisCluster:
    """A cluster of Redis < 7: it refuses a script with flags (a shebang line)."""

    closed = False

    def ping(self) -> bool:
        return True

    def script_load(self, script: str) -> str:
        assert script.startswith("#!lua flags=allow-cross-slot-keys\n")
        raise ResponseError("Error compiling script (new function): user_script:1: "
                            "unexpected symbol near '#'")

    def close(self) -> None:
        self.closed = True


def test_a_cluster_too_old_for_script_flags_is_a_config_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    old = OldRedisCluster()
    monkeypatch.setattr("connectors.redis.sink.make_client", lambda config: old)
    sink = RedisSink(RedisSinkConfig.model_validate({"urls": ["redis://127.0.0.1:7000"]}))
    with pytest.raises(ConfigError) as caught:
        sink.open()
    [problem] = caught.value.problems
    assert problem.path == "config.urls" and "Redis 7.0 or later" in problem.message
    assert "near '#'" in problem.message and old.closed
