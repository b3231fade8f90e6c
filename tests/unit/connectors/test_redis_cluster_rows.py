"""The Redis sink on a Redis Cluster: seed-node settings, the sink's own keys named into
each row's hash slot, and a batch split into one script call per slot, in rounds that keep
each slot's order."""

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

from connectors.contract import SinkRejectedError, SinkUnavailableError
from connectors.redis import RedisSinkConfig
from connectors.redis.cluster_batch import SlotBatches
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


def test_a_batch_becomes_one_call_per_slot_in_rounds() -> None:
    orders = TableEvents(table="orders")
    batch = SlotBatches(TTLS)
    keys = [f"orders:{n}" for n in range(50)] + ["orders:7"]  # orders:7 twice
    events = [orders.upsert({"id": n}, 100 + n) for n in range(len(keys))]
    for event, key in zip(events, keys, strict=True):
        batch.row(event, key, MARKER, "j", (b"{}",))
    assert len(batch) == len(keys)
    first, second = batch.rounds()
    assert len(first) == len({slot_of(key) for key in keys})
    assert [call_events for _, _, call_events in second] == [[events[-1]]]
    for calls in (first, second):
        assert len({slot_of(call_keys[1]) for call_keys, _, _ in calls}) == len(calls)
        for call_keys, args, call_events in calls:
            slot = slot_of(call_keys[1])
            assert call_keys[0] == slot_marker(MARKER, slot)
            assert {key_slot(k.encode()) for k in call_keys} == {slot}
            assert call_keys[2] == KeyNames(cluster=True).version_key(call_keys[1])
            assert args[3] == 1 and len(call_keys) == 1 + 2 * len(call_events)
    written = [event for calls in (first, second) for _, _, es in calls for event in es]
    assert sorted(written, key=events.index) == events


class FakeCluster:
    """A cluster client whose pipelines answer with queued replies (one list per
    ``execute``); ``script_load`` counts the loads."""

    def __init__(self, *answers: list[Any]) -> None:
        self.answers = list(answers)
        self.sent: list[list[tuple[Any, ...]]] = []
        self.loads = 0

    def pipeline(self, transaction: bool) -> FakeCluster:
        self.sent.append([])
        return self

    def execute_command(self, *args: Any, target_nodes: Any) -> None:
        assert args[0] == "EVALSHA" and target_nodes == slot_of(args[2 + args[2]])  # last key
        self.sent[-1].append(args)

    def get_node_from_key(self, key: str) -> int:
        return slot_of(key)

    def execute(self, raise_on_error: bool) -> list[Any]:
        return self.answers.pop(0)

    def script_load(self, script: str) -> str:
        self.loads += 1
        return "sha"


def slot_batch(rows: int) -> tuple[SlotBatches, list[Any]]:
    orders = TableEvents(table="orders")
    batch = SlotBatches(TTLS)
    events = [orders.upsert({"id": n}, 100 + n) for n in range(rows)]
    for n, event in enumerate(events):
        batch.row(event, f"orders:{n}", MARKER, "j", (b"{}",))
    return batch, events


def script_of(client: FakeCluster) -> Any:
    return type("FakeScript", (), {"registered_client": client, "sha": "sha",
                                   "script": "return 1"})()


def test_a_round_is_one_pipeline_and_a_lost_script_is_loaded_again() -> None:
    batch, events = slot_batch(3)  # orders:0, 1, 2: three slots
    client = FakeCluster([[], NoScriptError("NOSCRIPT"), [1, b"WRONGTYPE no"]], [[]])
    rejected = batch.run(script_of(client))
    assert [len(sent) for sent in client.sent] == [3, 1] and client.loads == 1
    [rejection] = rejected
    assert rejection.event in events and "WRONGTYPE" in rejection.reason


@pytest.mark.parametrize(("reply", "raised"), [
    (ConnectionError("gone"), SinkUnavailableError),
    (ClusterDownError("CLUSTERDOWN The cluster is down"), SinkUnavailableError),
    (MovedError("3999 127.0.0.1:6381"), SinkUnavailableError),
    (ResponseError("ERR something else"), SinkRejectedError),
])
def test_a_failed_call_fails_the_batch(reply: Exception, raised: type[Exception]) -> None:
    batch, _ = slot_batch(2)
    with pytest.raises(raised):
        batch.run(script_of(FakeCluster([[], reply])))
