"""``cdc run`` with ``metrics:``: /metrics moves, /healthz turns ready, the token is
enforced, the endpoint listens on 127.0.0.1 only, and logs are JSON without the token.

One real pipeline (PostgreSQL → file log → Redis connector) serves every test here.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..connectors.harness import wait_until
from .pipeline_process import TOKEN, Pipeline, running_pipeline, wait_until_ready

FIRST_IDS = itertools.count(1000, 10_000)  # each write its own ids (--count repeats tests)


@pytest.fixture(scope="module")
def pipeline(postgres_dsn: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Pipeline]:
    import uuid

    name = f"t_{uuid.uuid4().hex[:10]}"
    with running_pipeline(postgres_dsn, name, redis_url,
                          tmp_path_factory.mktemp("observability")) as running:
        wait_until_ready(running)
        yield running


def listening_addresses(port: int) -> list[str]:
    """Local addresses of sockets listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        lines = Path(table).read_text().splitlines()[1:]
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.append(address)
    return found


def test_says_where_its_status_page_is_once_ready(pipeline: Pipeline) -> None:
    url = f"http://127.0.0.1:{pipeline.port}/"
    wait_until(lambda: f"pipeline ready: status page {url}" in pipeline.stderr.read_text(),
               timeout=30, what="the ready line in cdc run's output")
    assert pipeline.stderr.read_text().count("pipeline ready: status page") == 1


def test_binds_loopback_by_default(pipeline: Pipeline) -> None:
    assert listening_addresses(pipeline.port) == ["0100007F"]  # 127.0.0.1, nothing else


def test_token_is_enforced(pipeline: Pipeline) -> None:
    for path in ("/metrics", "/healthz", "/status.json"):
        status, body = pipeline.get(path, token=None)
        assert status == 401, (path, body)
        assert pipeline.get(path, token="wrong")[0] == 401, path
        assert pipeline.get(path, token=TOKEN + "x")[0] == 401, path
        assert pipeline.get(path)[0] == 200, path
    status, page = pipeline.get("/", token=None)  # the page itself holds no data
    assert status == 200 and "status.js" in page


def test_healthz_reports_each_part(pipeline: Pipeline) -> None:
    status, body = pipeline.get("/healthz")
    assert status == 200
    assert json.loads(body) == {"status": "ready", "parts": {
        "capture": "streaming", "connector cache": "running"}}


def test_metrics_move_with_the_workload(pipeline: Pipeline) -> None:
    topic = f"{pipeline.name}.public.customers"
    before = pipeline.metric("distributary_capture_events_total", topic=topic) or 0.0
    written_before = pipeline.metric("distributary_connector_events_written_total",
                                     connector="cache") or 0.0
    pipeline.write(200, start=next(FIRST_IDS))
    deadline = time.monotonic() + 30
    while True:
        events = pipeline.metric("distributary_capture_events_total", topic=topic) or 0.0
        written = pipeline.metric("distributary_connector_events_written_total",
                                  connector="cache") or 0.0
        if events >= before + 400 and written > written_before:
            break
        assert time.monotonic() < deadline, (before, events, written_before, written)
        time.sleep(0.3)
    assert events == before + 400  # 200 inserts and 200 updates, each once
    # positions come from the server (read every sample_interval on its own connection);
    # a sample read before the slot existed has no retained WAL yet: wait for a later one
    deadline = time.monotonic() + 20
    while (pipeline.metric("distributary_capture_server_wal_lsn") is None
           or pipeline.metric("distributary_slot_retained_wal_bytes",
                              slot=pipeline.name) is None):
        assert time.monotonic() < deadline, "no server WAL position or slot retained WAL"
        time.sleep(0.3)
    acked = pipeline.metric("distributary_capture_acknowledged_lsn")
    server = pipeline.metric("distributary_capture_server_wal_lsn")
    assert acked is not None and server is not None and acked > 0 and server > 0
    lag_bytes = pipeline.metric("distributary_capture_lag_bytes")
    assert lag_bytes is not None and lag_bytes >= 0
    lag_seconds = pipeline.metric("distributary_capture_lag_seconds")
    assert lag_seconds is not None and 0 <= lag_seconds < 120
    retained = pipeline.metric("distributary_slot_retained_wal_bytes", slot=pipeline.name)
    assert retained is not None and retained > 0  # restart_lsn trails the current WAL
    assert pipeline.metric("distributary_capture_streaming") == 1
    assert pipeline.metric("distributary_ready") == 1
    assert pipeline.metric("distributary_connector_running", connector="cache") == 1
    # the connector's lag per partition settles at zero once it caught up
    deadline = time.monotonic() + 30
    while pipeline.metric("distributary_connector_lag", connector="cache", topic=topic,
                          partition="0") != 0:
        assert time.monotonic() < deadline, "the connector's lag never reached 0"
        time.sleep(0.5)
    assert pipeline.metric("distributary_connector_dead_letters_total",
                           connector="cache") == 0


def test_status_json_keeps_samples(pipeline: Pipeline) -> None:
    def status_json() -> dict[str, Any]:
        status, body = pipeline.get("/status.json")
        assert status == 200, body
        document: dict[str, Any] = json.loads(body)
        return document

    def last_events() -> int | None:
        samples = status_json()["samples"]
        return samples[-1]["events"] if samples else None

    # a throughput needs two counts: the first write of a new pipeline (this test may run
    # first) must come after a sample with the capture's count
    wait_until(lambda: last_events() is not None, timeout=30,
               what="a sample with the capture's event count")
    events_before = last_events() or 0
    pipeline.write(50, start=next(FIRST_IDS))

    def sampled() -> bool:  # three samples, the last one taken after the 100 events
        samples = status_json()["samples"]
        return len(samples) >= 3 and (samples[-1]["events"] or 0) >= events_before + 100

    wait_until(sampled, timeout=30, what="a sample counting the 100 new events")
    document = status_json()
    assert document["ready"] is True and document["interval_s"] == 0.5
    samples = document["samples"]
    assert len(samples) >= 3
    assert [s["t"] for s in samples] == sorted(s["t"] for s in samples)
    assert samples[-1]["events"] >= 100
    assert any((s["events_per_s"] or 0) > 0 for s in samples)
    assert "cache" in samples[-1]["connector_lag"]
    assert document["topics"][f"{pipeline.name}.public.customers"] >= 100


def test_logs_are_json_lines_without_the_token(pipeline: Pipeline) -> None:
    text = pipeline.stderr.read_text()  # still written to: complete lines only
    lines = [line for line in text[:text.rfind("\n") + 1].splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"ts", "level", "logger", "message"} <= set(r) for r in records)
    started = [r for r in records if r["message"].startswith("observability endpoint on")]
    assert started and started[0]["host"] == "127.0.0.1" and started[0]["port"] == pipeline.port
    assert TOKEN not in pipeline.stderr.read_text()
