"""The webhook sink through the runtime, against a real HTTP server: signatures,
retries on 503/429/timeouts, dead letters on 400, no secrets in errors."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.config import ConnectorConfig
from cdc.log.file import FileLog, FileLogSettings
from connectors.contract import version_of
from connectors.runtime import ConnectorFailedError, ConnectorRunner, RunnerOptions, RuntimeMetrics
from connectors.webhook import signature_matches
from tests.unit.connectors.conftest import (
    TOPIC,
    append_events,
    committed,
    read_topic,
    run_until,
    sample,
)

from .webhook_receiver import Receiver, Request, webhook_receiver

SECRET = "hunter2-signing-key"


@pytest.fixture
def event_log(tmp_path: Path) -> Iterator[FileLog]:
    log = FileLog(tmp_path / "log", FileLogSettings(default_partitions=1, fsync=False))
    yield log
    log.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as running:
        yield running


def webhook(url: str, *, max_attempts: int | None = None, **settings: Any) -> ConnectorConfig:
    """A webhook connector ``c1`` on TOPIC posting to ``url`` (``settings``: the sink's)."""
    return ConnectorConfig.model_validate({
        "name": "c1", "type": "webhook", "topics": [TOPIC], "batch_size": 4,
        "batch_timeout": "50ms", "retry": {"initial_backoff": "10ms", "max_backoff": "20ms",
                                           "max_attempts": max_attempts},
        "config": {"url": url, "timeout": "2s", **settings}})


def runner(log: FileLog, connector: ConnectorConfig, delays: list[float] | None = None,
           metrics: RuntimeMetrics | None = None) -> ConnectorRunner:
    options = RunnerOptions(retry_sleep=delays.append if delays is not None else None)
    return ConnectorRunner(connector, log, topic_prefix="app", metrics=metrics,
                           options=options)


def test_batches_are_posted_signed(event_log: FileLog, receiver: Receiver) -> None:
    append_events(event_log, list(range(6)))
    connector = webhook(receiver.url, signing_secret=SECRET, headers={"X-Team": "search"})
    run_until(runner(event_log, connector), lambda: len(receiver.accepted_keys()) == 6)
    assert [r.keys for r in receiver.requests] == [[0, 1, 2, 3], [4, 5]]
    first = receiver.requests[0]
    assert first.path == "/hook"
    assert first.headers["content-type"] == "application/json"
    assert first.headers["x-team"] == "search"
    assert first.headers["x-distributary-signature"].startswith("sha256=")
    assert all(signature_matches(SECRET, r.body, r.headers["x-distributary-signature"])
               for r in receiver.requests)
    assert not signature_matches("wrong", first.body, first.headers["x-distributary-signature"])
    body = orjson.loads(first.body)
    assert body["connector"] == "c1"
    assert body["events"][1] == {
        "topic": TOPIC, "partition": 0, "offset": 1, "version": version_of(101, 0),
        "event": {"op": "u", "key": {"id": 1}, "before": None, "after": {"id": 1},
                  "unchanged": []}}
    assert committed(event_log) == {(TOPIC, 0): 6}


def test_unsigned_without_a_secret(event_log: FileLog, receiver: Receiver) -> None:
    append_events(event_log, [1])
    run_until(runner(event_log, webhook(receiver.url)), lambda: receiver.accepted_keys() == [1])
    assert "x-distributary-signature" not in receiver.requests[0].headers


def test_503_and_429_are_retried_honouring_retry_after(event_log: FileLog,
                                                       receiver: Receiver) -> None:
    answers = [(503, {}), (429, {"Retry-After": "3"}), (503, {"Retry-After": "1"})]
    receiver.answer = lambda request: answers.pop(0) if answers else (200, {})
    append_events(event_log, [1, 2])
    delays: list[float] = []
    metrics = RuntimeMetrics()
    run_until(runner(event_log, webhook(receiver.url), delays, metrics),
              lambda: receiver.accepted_keys() == [1, 2])
    assert len(receiver.requests) == 4
    assert delays[1:] == [3.0, 1.0] and delays[0] <= 0.01
    assert sample(metrics, "retries_total") == 3
    assert committed(event_log) == {(TOPIC, 0): 2}


def test_a_timeout_is_retried(event_log: FileLog, receiver: Receiver) -> None:
    receiver.delays = [1.0]
    append_events(event_log, [1])
    delays: list[float] = []
    run_until(runner(event_log, webhook(receiver.url, timeout="200ms"), delays),
              lambda: receiver.accepted_keys() == [1])
    assert len(delays) == 1


def test_a_connection_closed_while_idle_is_reopened_without_a_retry(
        event_log: FileLog, receiver: Receiver) -> None:
    receiver.hang_up_after_reply = True
    append_events(event_log, list(range(8)))
    delays: list[float] = []
    run_until(runner(event_log, webhook(receiver.url), delays),
              lambda: len(receiver.accepted_keys()) == 8)
    assert [r.keys for r in receiver.requests] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert delays == []


def test_a_400_sends_only_the_refused_event_to_the_dead_letters(event_log: FileLog,
                                                                receiver: Receiver) -> None:
    def answer(request: Request) -> tuple[int, dict[str, str]]:
        return (400, {}) if 2 in request.keys else (200, {})

    receiver.answer = answer
    append_events(event_log, list(range(8)))
    run_until(runner(event_log, webhook(receiver.url)),
              lambda: committed(event_log).get((TOPIC, 0)) == 8)
    assert sorted(receiver.accepted_keys()) == [0, 1, 3, 4, 5, 6, 7]
    [letter] = read_topic(event_log, "app.dlq.c1")
    assert letter["key"] == {"id": 2}
    assert letter["error_type"] == "WebhookRejectedError"
    assert letter["error"] == (f"WebhookRejectedError: {receiver.url} answered 400 Bad Request: "
                               '{"ok":false}')


def test_errors_never_show_credentials(event_log: FileLog, receiver: Receiver) -> None:
    receiver.answer = lambda request: (401, {})
    url = receiver.url.replace("http://", "http://deploy:s3cr3t-pw@")
    append_events(event_log, [1])
    run_until(runner(event_log, webhook(url, headers={"Authorization-Token": "tok-123"})),
              lambda: committed(event_log).get((TOPIC, 0)) == 1)
    request = receiver.requests[0]
    assert request.headers["authorization"] == "Basic " + base64.b64encode(
        b"deploy:s3cr3t-pw").decode()
    [letter] = read_topic(event_log, "app.dlq.c1")
    assert letter["error"].startswith(f"WebhookRejectedError: {receiver.url} answered 401")
    assert "s3cr3t" not in letter["error"] and "tok-123" not in letter["error"]


def test_an_unreachable_endpoint_is_transient(event_log: FileLog,
                                              caplog: pytest.LogCaptureFixture) -> None:
    closed = "http://u:topsecret@127.0.0.1:9/hook"  # the discard port: nobody listens
    test_runner = runner(event_log, webhook(closed, max_attempts=3), [])
    run_until(test_runner, lambda: False, timeout=5)
    with pytest.raises(ConnectorFailedError, match=r"open still failing after 3 attempts: "
                                                   r"WebhookUnavailableError: cannot connect "
                                                   r"to http://127\.0\.0\.1:9/hook"):
        test_runner.raise_failure()
    assert "topsecret" not in caplog.text
