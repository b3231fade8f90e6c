"""Retries with exponential backoff and full jitter, for one connector.

What is retried:

* errors marked ``TransientError`` (``SinkUnavailableError`` and the like), honouring
  their ``retry_after``, until ``RetryPolicy.max_attempts`` (default: without limit);
* connection errors a sink let through untranslated (``ConnectionError``,
  ``TimeoutError``, ``socket.gaierror``), the same way, with a note that the sink should
  translate them;
* any other unexpected exception (a bug, or a library error the sink did not know) a
  few times only (``unexpected_attempts``), logged with its traceback each time, then
  handed on as ``WriteRefusedError``, so a bug is never retried forever in silence.

``TerminalError`` is never retried: it becomes ``WriteRefusedError`` at once;
``SinkStateLostError`` is never retried either, and handed on as it is. Every
retry is logged with the connector, the action, the attempt number, the delay and the
error; while a call is retrying, ``Retrier.problem`` says what and why (the connector's
reason on ``/healthz`` and the status page: a password changed under a running pipeline
shows there, not only in the log).
"""

from __future__ import annotations

import logging
import random
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from cdc.backoff import ExponentialBackoff
from cdc.config import RetryConfig
from cdc.errors import ConfigError, TerminalError, TransientError
from connectors.contract import SinkStateLostError

from .errors import RetriesExhaustedError, StopRequested, WriteRefusedError, describe

log = logging.getLogger(__name__)

T = TypeVar("T")

UNTRANSLATED_TRANSIENT: tuple[type[BaseException], ...] = (
    ConnectionError, TimeoutError, socket.gaierror)
MAX_RETRY_AFTER_S = 900.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Backoff bounds (seconds) and attempt limits."""

    initial_backoff: float = 0.5
    max_backoff: float = 60.0
    max_attempts: int | None = None
    unexpected_attempts: int = 3

    @classmethod
    def from_config(cls, config: RetryConfig) -> RetryPolicy:
        """The policy a connector's ``retry:`` section describes."""
        return cls(initial_backoff=config.initial_backoff.total_seconds(),
                   max_backoff=config.max_backoff.total_seconds(),
                   max_attempts=config.max_attempts)

    def delay(self, attempt: int, draw: float, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based); ``draw`` in [0, 1)."""
        backoff = ExponentialBackoff(self.initial_backoff, self.max_backoff)
        jittered = backoff.full_jitter(attempt, draw)
        if retry_after is not None and retry_after > 0:
            return min(max(jittered, retry_after), MAX_RETRY_AFTER_S)
        return jittered


def is_transient(error: BaseException) -> bool:
    """True for errors worth retrying without limit."""
    return isinstance(error, (TransientError, *UNTRANSLATED_TRANSIENT))


class Retrier:
    """Calls an action until it succeeds, following a ``RetryPolicy``."""

    def __init__(self, connector: str, policy: RetryPolicy, stop: threading.Event, *,
                 sleep: Callable[[float], object] | None = None,
                 draw: Callable[[], float] = random.random,
                 on_retry: Callable[[], None] | None = None) -> None:
        self.connector = connector
        self.policy = policy
        self._stop = stop
        self._sleep: Callable[[float], object] = sleep if sleep is not None else stop.wait
        self._draw = draw
        self._on_retry = on_retry
        self._failing: dict[int, str] = {}  # thread → what it is retrying, and why

    @property
    def problem(self) -> str | None:
        """What a thread is retrying and why (``/healthz``'s reason), until it succeeds."""
        problems = list(self._failing.values())  # one step: other threads may change it
        return problems[0] if problems else None

    def call(self, action: str, operation: Callable[[], T], *,
             unexpected_attempts: int | None = None) -> T:
        """``operation()``, retried as the module docstring says.

        Raises ``WriteRefusedError`` (terminal or persistent unexpected error),
        ``RetriesExhaustedError`` or ``StopRequested``.
        """
        unexpected_limit = (self.policy.unexpected_attempts if unexpected_attempts is None
                            else unexpected_attempts)
        try:
            return self._call(action, operation, unexpected_limit)
        finally:
            self._failing.pop(threading.get_ident(), None)  # succeeded, or gave up

    def _call(self, action: str, operation: Callable[[], T], unexpected_limit: int) -> T:
        attempt = 0
        while True:
            if self._stop.is_set() and attempt:
                raise StopRequested(f"{self.connector}: stopping during retries of {action}")
            attempt += 1
            try:
                return operation()
            except (StopRequested, WriteRefusedError, RetriesExhaustedError, ConfigError,
                    SinkStateLostError):
                raise  # ConfigError: a setting to fix (a login refused at start), not retried;
                # SinkStateLostError: the worker stops, to start again from the sink's state
            except TerminalError as exc:
                raise WriteRefusedError(action, exc) from exc
            except Exception as exc:  # classified below; nothing is swallowed
                self._after_failure(action, attempt, exc, unexpected_limit)

    def _after_failure(self, action: str, attempt: int, error: Exception,
                       unexpected_limit: int) -> None:
        transient = is_transient(error)
        limit = self.policy.max_attempts if transient else unexpected_limit
        if limit is not None and attempt >= limit:
            if transient:
                raise RetriesExhaustedError(action, attempt, error) from error
            log.error("%s: %s failed with an unexpected error (attempt %d of %d); giving up "
                      "on it", self.connector, action, attempt, limit, exc_info=error,
                      extra={"connector": self.connector, "attempt": attempt})
            raise WriteRefusedError(action, error) from error
        delay = self.policy.delay(attempt, self._draw(), getattr(error, "retry_after", None))
        note = "" if isinstance(error, TransientError) else (
            " (untranslated by the sink)" if transient else " (unexpected)")
        log.log(logging.WARNING if transient else logging.ERROR,
                "%s: %s failed (attempt %d), retrying in %.2fs: %s%s", self.connector, action,
                attempt, delay, describe(error), note, exc_info=None if transient else error,
                extra={"connector": self.connector, "attempt": attempt, "delay_s": delay})
        if self._on_retry is not None:
            self._on_retry()
        self._failing[threading.get_ident()] = f"retrying {action}: {describe(error)}"
        self._sleep(delay)
