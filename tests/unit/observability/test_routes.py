from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry, Counter

from cdc.config.models import MetricsConfig
from cdc.errors import ConfigError
from cdc.observability import ConnectorsProbe, ObservabilityServer
from cdc.observability.auth import BearerToken
from cdc.observability.connector_metrics import RuntimeMetrics
from cdc.observability.endpoint import Routes
from compose.launcher.base import free_port


def routes(token: str | None = None) -> Routes:
    registry = CollectorRegistry()
    Counter("demo_things", "Things.", registry=registry).inc(3)
    return Routes(registry, BearerToken(token), lambda: (503, {"status": "not ready"}),
                  lambda: {"samples": []})


def test_metrics_health_and_status_answer() -> None:
    answer = routes()
    status, kind, body = answer.answer("/metrics", None)
    assert status == 200 and kind.startswith("text/plain")
    assert b"demo_things_total 3.0" in body
    status, _, body = answer.answer("/healthz", None)
    assert status == 503 and json.loads(body) == {"status": "not ready"}
    assert answer.answer("/status.json?x=1", None)[:2] == (200, "application/json; charset=utf-8")


def test_the_page_and_script_are_served_and_other_paths_are_not_found() -> None:
    answer = routes("tok")
    status, kind, body = answer.answer("/", None)
    assert status == 200 and kind.startswith("text/html") and b"status.js" in body
    status, kind, body = answer.answer("/status.js", None)
    assert status == 200 and kind.startswith("text/javascript") and b"drawChart" in body
    assert b"http://" not in body.replace(b"http://www.w3.org/2000/svg", b"")  # nothing off-box
    assert answer.answer("/nope", "Bearer tok")[0] == 404


def test_data_paths_need_the_token() -> None:
    answer = routes("tok")
    for path in ("/metrics", "/healthz", "/status.json"):
        assert answer.answer(path, None)[0] == 401
        assert answer.answer(path, "Bearer nope")[0] == 401
        assert answer.answer(path, "Bearer tok")[0] != 401


def test_the_server_serves_on_loopback_and_reports_a_taken_port() -> None:
    metrics = RuntimeMetrics()
    config = MetricsConfig(port=1, sample_interval=timedelta(milliseconds=100))
    server = ObservabilityServer(config.model_copy(update={"port": free_port()}),
                                 metrics.registry,
                                 connectors=ConnectorsProbe(metrics, ["cache"]))
    server.start()
    try:
        host, port = server.address
        assert host == "127.0.0.1"
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
        assert answer.value.code == 503
        assert json.loads(answer.value.read())["reasons"] == ["connector cache: not started yet"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
        assert 'distributary_connector_running{connector="cache"} 0.0' in text
        assert "distributary_ready 0.0" in text
        with pytest.raises(ConfigError, match=r"metrics\.port: cannot listen on 127\.0\.0\.1"):
            ObservabilityServer(config.model_copy(update={"port": port}), CollectorRegistry())
    finally:
        server.stop()
