"""Several OpenSearch hosts: the ``hosts`` checks, the ``replicas`` setting, and the
client's failover (a real opensearch-py transport over fake connections)."""

from __future__ import annotations

from typing import Any, ClassVar

import orjson
import pytest
from opensearchpy import Connection, OpenSearch
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import TransportError
from pydantic import ValidationError

from connectors.contract import SinkEvent, SinkUnavailableError
from connectors.opensearch import OpenSearchSinkConfig
from connectors.opensearch.bulk import BulkAction, index_action, send
from connectors.opensearch.client import OrjsonSerializer, failover_options, make_client
from connectors.opensearch.mapping import index_body

from .sink_events import TableEvents


def problems(hosts: list[str], **settings: Any) -> dict[tuple[Any, ...], tuple[str, Any]]:
    with pytest.raises(ValidationError) as caught:
        OpenSearchSinkConfig.model_validate({"hosts": hosts, **settings})
    return {tuple(error["loc"]): (error["msg"], error["input"])
            for error in caught.value.errors()}


def test_several_hosts_of_one_cluster_are_accepted() -> None:
    config = OpenSearchSinkConfig.model_validate(
        {"hosts": ["http://search-1:9200", "http://search-2:9200", "http://search-3"],
         "replicas": 1})
    assert len(config.hosts) == 3
    assert config.replicas == 1


@pytest.mark.parametrize(("hosts", "number", "words"), [
    (["http://a:9200", "http://A:9200/"], 1, ["same node as hosts[0]", "list each node once"]),
    (["http://a", "http://a:9200"], 1, ["same node as hosts[0]"]),
    (["http://a:9200", "https://b:9200"], 1, ["same scheme", "http://"]),
    (["http://a:9200", "http://b:9200?pretty"], 1, ["no query", "remove"]),
    (["http://a:9200/search", "http://b:9200/"], 1, ["same path prefix", "/search"]),
])
def test_a_bad_host_list_names_the_host_and_the_fix(hosts: list[str], number: int,
                                                    words: list[str]) -> None:
    found = problems(hosts)
    message, value = found[("hosts", number)]
    assert all(word in message for word in words), message
    assert value == hosts[number]


def test_credentials_in_a_host_are_refused_without_echoing_them() -> None:
    found = problems(["http://a:9200", "http://elastic:s3cret@b:9200"])
    message, value = found[("hosts", 1)]
    assert "username and password" in message
    assert value == "http://***@b:9200"
    assert "s3cret" not in str(found)


@pytest.mark.parametrize("replicas", [-1, 17])
def test_replicas_out_of_range_are_refused(replicas: int) -> None:
    assert ("replicas",) in problems(["http://a:9200"], replicas=replicas)


def test_replicas_reach_the_created_index_only_when_set() -> None:
    assert "number_of_replicas" not in index_body("t", 0, 60)["settings"]["index"]
    assert index_body("t", 0, 60, replicas=1)["settings"]["index"]["number_of_replicas"] == 1


def test_failover_retries_each_other_node_once_and_never_an_answer() -> None:
    assert failover_options(1) == {"max_retries": 0, "retry_on_timeout": False,
                                   "retry_on_status": (), "dead_timeout": 30.0}
    three = failover_options(3)
    assert (three["max_retries"], three["retry_on_timeout"], three["retry_on_status"]) == (
        2, True, ())
    client = make_client(OpenSearchSinkConfig.model_validate(
        {"hosts": ["http://a:9200", "http://b:9200"]}))
    assert (client.transport.max_retries, client.transport.retry_on_status) == (1, ())


class FakeNode(Connection):
    """A node answering bulk requests by its host name: ``down`` refuses connections,
    ``busy`` answers 503, others succeed; every request is recorded."""

    down: ClassVar[set[str]] = set()
    busy: ClassVar[set[str]] = set()
    requests: ClassVar[list[str]] = []

    def perform_request(self, method: str, url: str, params: Any = None, body: Any = None,
                        timeout: Any = None, ignore: Any = (), headers: Any = None
                        ) -> tuple[int, dict[str, str], str]:
        self.requests.append(self.host)
        if self.hostname in self.down:
            raise OpenSearchConnectionError("N/A", "connection refused", None)
        if self.hostname in self.busy:
            raise TransportError(503, "unavailable_shards_exception", {})
        return 200, {}, orjson.dumps({"errors": False, "items": []}).decode()


@pytest.fixture
def cluster() -> OpenSearch:
    FakeNode.down, FakeNode.busy, FakeNode.requests = set(), set(), []
    return OpenSearch(hosts=["http://a:9200", "http://b:9200"], connection_class=FakeNode,
                      serializer=OrjsonSerializer(), randomize_hosts=False,
                      **failover_options(2))


def actions() -> list[BulkAction]:
    change: SinkEvent = TableEvents().upsert({"id": 1, "v": "x"}, 10)
    return [index_action(change, "orders", "1", {"id": 1, "v": "x"})]


def test_a_bulk_request_to_a_dead_node_is_sent_to_the_other_one(cluster: OpenSearch) -> None:
    FakeNode.down.add("a")
    for _ in range(3):
        assert send(cluster, actions(), 500, 1 << 20) == []
    assert FakeNode.requests == ["http://a:9200", "http://b:9200", "http://b:9200",
                                 "http://b:9200"], "a marked dead after its first failure"


def test_every_node_down_is_transient_not_a_rejection(cluster: OpenSearch) -> None:
    FakeNode.down.update({"a", "b"})
    with pytest.raises(SinkUnavailableError, match="did not answer"):
        send(cluster, actions(), 500, 1 << 20)


def test_an_answer_is_not_retried_on_another_node(cluster: OpenSearch) -> None:
    FakeNode.busy.add("a")
    with pytest.raises(SinkUnavailableError, match="503"):
        send(cluster, actions(), 500, 1 << 20)
    assert FakeNode.requests == ["http://a:9200"]
    assert send(cluster, actions(), 500, 1 << 20) == []  # a is not dead: round robin to b


def test_each_node_keeps_a_connection_for_every_bulk_request_in_flight() -> None:
    """urllib3 keeps one connection a node by default: a second bulk request in flight
    opened (and dropped) a connection of its own every time."""
    client = make_client(OpenSearchSinkConfig.model_validate(
        {"hosts": ["http://a:9200", "http://b:9200"], "bulk_concurrency": 3}))
    pools = [node.pool for node in client.transport.connection_pool.connections]
    assert [pool.pool.maxsize for pool in pools] == [4, 4]
