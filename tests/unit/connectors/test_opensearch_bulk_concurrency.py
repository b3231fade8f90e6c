"""A batch's bulk requests sent at once (``bulk.send`` with an executor): every action
sent exactly once, in requests of at least ``MIN_SPLIT``, at most ``concurrency`` in
flight, rejections gathered, and a retry asked for only once every request has ended."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import orjson
import pytest
from opensearchpy import OpenSearch

from connectors.contract import SinkUnavailableError
from connectors.opensearch.bulk import MIN_SPLIT, BulkAction, index_action, send

from .sink_events import TableEvents


class _Cluster:
    """The ``bulk`` call of a client: answers each item by its document's ``v``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = self.most = 0
        self.requests: list[list[int]] = []
        self.ended = 0

    def bulk(self, body: bytes, filter_path: str) -> dict[str, Any]:
        lines = body.splitlines()
        documents = [orjson.loads(line) for line in lines[1::2]]
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.requests.append([document["id"] for document in documents])
        time.sleep(0.02)
        with self.lock:
            self.in_flight -= 1
            self.ended += 1
        statuses = {"ok": 201, "bad": 400, "busy": 429}
        items = [{"index": {"status": statuses[document["v"]],
                            **({} if document["v"] == "ok" else
                               {"error": {"type": document["v"], "reason": "r"}})}}
                 for document in documents]
        return {"errors": any(document["v"] != "ok" for document in documents),
                "items": items}


def _actions(values: list[str]) -> list[BulkAction]:
    table = TableEvents()
    return [index_action(table.upsert({"id": number, "v": value}, 10 + number), "t",
                         str(number), {"id": number, "v": value})
            for number, value in enumerate(values)]


@pytest.mark.parametrize(("count", "concurrency", "requests"), [
    (1000, 2, [500, 500]), (1000, 4, [250] * 4), (450, 4, [113, 113, 113, 111]),
    (250, 4, [125, 125]), (150, 2, [150]), (2000, 2, [500] * 4)])
def test_a_batch_is_split_among_requests_sent_at_once(count: int, concurrency: int,
                                                      requests: list[int]) -> None:
    cluster = _Cluster()
    with ThreadPoolExecutor(concurrency) as sending:
        assert send(cast(OpenSearch, cluster), _actions(["ok"] * count), 500, 1 << 30,
                    sending, concurrency) == []
    assert sorted(map(len, cluster.requests), reverse=True) == requests
    assert sorted(n for request in cluster.requests for n in request) == list(range(count))
    assert all(len(r) >= MIN_SPLIT for r in cluster.requests) or len(cluster.requests) == 1
    assert cluster.most == min(concurrency, len(requests))


def test_without_an_executor_requests_go_one_at_a_time() -> None:
    cluster = _Cluster()
    assert send(cast(OpenSearch, cluster), _actions(["ok"] * 1200), 500, 1 << 30) == []
    assert [len(r) for r in cluster.requests] == [500, 500, 200] and cluster.most == 1


def test_rejections_are_gathered_and_a_retry_waits_for_every_request() -> None:
    cluster = _Cluster()
    values = ["ok"] * 600
    values[10] = values[550] = "bad"
    with ThreadPoolExecutor(2) as sending:
        rejected = send(cast(OpenSearch, cluster), _actions(values), 500, 1 << 30, sending, 2)
        assert sorted(r.event.event["after"]["id"] for r in rejected) == [10, 550]
        values[599] = "busy"
        cluster.ended = 0
        with pytest.raises(SinkUnavailableError, match="retry: HTTP 429 busy"):
            send(cast(OpenSearch, cluster), _actions(values), 500, 1 << 30, sending, 2)
        assert cluster.ended == 2 and cluster.in_flight == 0  # none left in flight
