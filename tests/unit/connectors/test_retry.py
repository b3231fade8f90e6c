"""Backoff with full jitter, retry_after, attempt limits, and what is never retried."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from cdc.config import RetryConfig
from connectors.contract import SinkRejectedError, SinkStateLostError, SinkUnavailableError
from connectors.runtime import (
    Retrier,
    RetriesExhaustedError,
    RetryPolicy,
    StopRequested,
    WriteRefusedError,
)


def failing(errors: list[Exception], result: str = "ok") -> Callable[[], str]:
    """An operation raising ``errors`` one per call, then returning ``result``."""
    calls = list(errors)

    def operation() -> str:
        if calls:
            raise calls.pop(0)
        return result

    return operation


def retrier(policy: RetryPolicy, delays: list[float], *, draw: float = 0.5,
            stop: threading.Event | None = None) -> Retrier:
    return Retrier("c1", policy, stop or threading.Event(), sleep=delays.append,
                   draw=lambda: draw)


def test_delay_grows_exponentially_under_full_jitter() -> None:
    policy = RetryPolicy(initial_backoff=0.5, max_backoff=4.0)
    assert [policy.delay(n, 1.0) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert [policy.delay(n, 0.25) for n in (1, 3)] == [0.125, 0.5]
    assert policy.delay(3, 0.0) == 0.0  # full jitter: anywhere from zero to the ceiling
    assert policy.delay(10_000, 1.0) == 4.0


def test_retry_after_is_honoured() -> None:
    policy = RetryPolicy(initial_backoff=0.5, max_backoff=4.0)
    assert policy.delay(1, 0.5, retry_after=7.0) == 7.0
    assert policy.delay(5, 1.0, retry_after=1.0) == 4.0
    assert policy.delay(1, 0.5, retry_after=10_000) == 900.0


def test_policy_from_config() -> None:
    config = RetryConfig(initial_backoff=timedelta(milliseconds=100),
                         max_backoff=timedelta(seconds=2), max_attempts=5)
    assert RetryPolicy.from_config(config) == RetryPolicy(0.1, 2.0, 5)


def test_transient_errors_are_retried_without_limit_and_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    delays: list[float] = []
    errors: list[Exception] = [SinkUnavailableError("down")] * 20
    with caplog.at_level(logging.WARNING, "connectors.runtime.retry"):
        assert retrier(RetryPolicy(1.0, 8.0), delays, draw=1.0).call("write", failing(
            errors)) == "ok"
    assert delays == [1.0, 2.0, 4.0] + [8.0] * 17
    assert len(caplog.records) == 20
    first = caplog.records[0].getMessage()
    assert first == "c1: write failed (attempt 1), retrying in 1.00s: SinkUnavailableError: down"
    assert caplog.records[-1].attempt == 20  # type: ignore[attr-defined]


def test_retry_after_of_the_error_sets_the_delay() -> None:
    delays: list[float] = []
    retrier(RetryPolicy(0.1, 1.0), delays).call("write", failing(
        [SinkUnavailableError("429", retry_after=3.0)]))
    assert delays == [3.0]


def test_untranslated_connection_errors_are_transient(
        caplog: pytest.LogCaptureFixture) -> None:
    delays: list[float] = []
    errors: list[Exception] = [ConnectionRefusedError(111, "refused"), TimeoutError("slow")]
    retrier(RetryPolicy(0.1, 1.0), delays).call("write", failing(errors))
    assert len(delays) == 2
    assert "(untranslated by the sink)" in caplog.records[0].getMessage()


def test_max_attempts_ends_transient_retries() -> None:
    delays: list[float] = []
    with pytest.raises(RetriesExhaustedError, match="write still failing after 3 attempts: "
                                                    "SinkUnavailableError: down"):
        retrier(RetryPolicy(0.1, 1.0, max_attempts=3), delays).call(
            "write", failing([SinkUnavailableError("down")] * 5))
    assert len(delays) == 2


def test_terminal_errors_are_never_retried() -> None:
    delays: list[float] = []
    with pytest.raises(WriteRefusedError) as refused:
        retrier(RetryPolicy(), delays).call("write", failing([SinkRejectedError("bad")]))
    assert delays == [] and isinstance(refused.value.cause, SinkRejectedError)


def test_a_sink_that_lost_its_state_is_neither_retried_nor_refused() -> None:
    delays: list[float] = []
    lost = SinkStateLostError("the state store lost its held batches")
    with pytest.raises(SinkStateLostError) as raised:  # not WriteRefusedError: no split
        retrier(RetryPolicy(), delays).call("write", failing([lost]))
    assert raised.value is lost and delays == []


def test_unexpected_errors_get_a_few_attempts_then_are_refused(
        caplog: pytest.LogCaptureFixture) -> None:
    delays: list[float] = []
    bug = KeyError("missing")
    with pytest.raises(WriteRefusedError) as refused:
        retrier(RetryPolicy(unexpected_attempts=3), delays).call("write", failing([bug] * 5))
    assert refused.value.cause is bug and len(delays) == 2
    assert [r.levelname for r in caplog.records] == ["ERROR"] * 3
    assert all(r.exc_info is not None for r in caplog.records), "tracebacks are logged"


def test_a_stop_ends_the_retries() -> None:
    stop = threading.Event()
    delays: list[float] = []

    def sleep(delay: float) -> None:
        delays.append(delay)
        stop.set()

    with pytest.raises(StopRequested):
        Retrier("c1", RetryPolicy(), stop, sleep=sleep).call(
            "write", failing([SinkUnavailableError("down")] * 3))
    assert len(delays) == 1


def test_the_problem_being_retried_is_told_until_the_call_ends() -> None:
    seen: list[str | None] = []
    retries = Retrier("c1", RetryPolicy(1.0, 8.0), threading.Event(),
                      sleep=lambda _: seen.append(retries.problem), draw=lambda: 0.5)
    assert retries.problem is None
    assert retries.call("write", failing([SinkUnavailableError("HTTP 401 (login refused)"),
                                          ConnectionError("reset")])) == "ok"
    assert seen == ["retrying write: SinkUnavailableError: HTTP 401 (login refused)",
                    "retrying write: ConnectionError: reset"]
    assert retries.problem is None, "cleared once the write went through"
    gave_up = Retrier("c1", RetryPolicy(1.0, 8.0, max_attempts=2), threading.Event(),
                      sleep=lambda _: None)
    with pytest.raises(RetriesExhaustedError):
        gave_up.call("write", failing([SinkUnavailableError("x")] * 3))
    assert gave_up.problem is None, "a call that gave up is the worker's failure instead"
