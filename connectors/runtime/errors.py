"""Errors of the connector runtime.

    DistributaryError
    ├── SinkError
    │   ├── SinkNotRunnableError   the registered sink has no factory, or it built no Sink
    │   └── WriteRefusedError      terminal for a whole write: the runtime isolates the bad event
    ├── FlushFailedError           a sink's flush failed other than transiently (never
    │                              blamed on the batch's events)
    ├── RetriesExhaustedError      transient failures outlasted RetryConfig.max_attempts
    ├── ConnectorFailedError       a worker stopped on an error (offsets left uncommitted)
    └── StopRequested              the runner is stopping while a retry waits (not a failure)
"""

from __future__ import annotations

from cdc.errors import DistributaryError, SinkError, TerminalError


class SinkNotRunnableError(SinkError, TerminalError):
    """A sink type that can be validated but not run (no factory, or not a Sink)."""

    def __init__(self, sink_type: str, reason: str) -> None:
        self.sink_type = sink_type
        super().__init__(f"sink type {sink_type!r} cannot run: {reason}")


class WriteRefusedError(SinkError, TerminalError):
    """The sink failed a whole write for good (a TerminalError, or an unexpected error that
    persisted); ``cause`` is the sink's error."""

    def __init__(self, action: str, cause: BaseException) -> None:
        self.action = action
        self.cause = cause
        super().__init__(f"{action} failed: {describe(cause)}")


class FlushFailedError(DistributaryError):
    """A sink's ``flush`` failed with an error that is not transient; ``cause`` is it."""

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause
        super().__init__(f"flush failed: {describe(cause)}")


class RetriesExhaustedError(DistributaryError):
    """A transient failure outlasted the configured number of attempts."""

    def __init__(self, action: str, attempts: int, cause: BaseException) -> None:
        self.action = action
        self.attempts = attempts
        self.cause = cause
        super().__init__(f"{action} still failing after {attempts} attempts: {describe(cause)}")


class ConnectorFailedError(DistributaryError):
    """A connector's worker stopped on an error; its batch in hand was not committed."""

    def __init__(self, connector: str, cause: BaseException) -> None:
        self.connector = connector
        self.cause = cause
        super().__init__(f"connector {connector!r} stopped: {describe(cause)}")


class StopRequested(DistributaryError):
    """The runner is stopping; the batch in hand is left uncommitted (redelivered later)."""


MAX_ERROR_CHARS = 2_000


def describe(error: BaseException) -> str:
    """``Type: message`` of an error, cut to a sane length (sinks keep secrets out)."""
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + "…"
