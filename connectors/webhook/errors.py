"""Errors of the webhook sink, translated at the HTTP boundary.

    SinkUnavailableError (transient: the runtime retries, honouring retry_after)
    └── WebhookUnavailableError   connection failed or timed out; HTTP 408, 425, 429, 5xx
    SinkRejectedError (terminal: the runtime isolates the event and dead-letters it)
    └── WebhookRejectedError      any other status outside 2xx (400, 401, 404, 413, 3xx …)

Messages name the endpoint without its userinfo, and never a header value.
"""

from __future__ import annotations

from connectors.contract import SinkRejectedError, SinkUnavailableError


class WebhookUnavailableError(SinkUnavailableError):
    """The endpoint could not take the batch now."""

    def __init__(self, message: str, *, status: int | None = None,
                 retry_after: float | None = None) -> None:
        self.status = status
        super().__init__(message, retry_after=retry_after)


class WebhookRejectedError(SinkRejectedError):
    """The endpoint refused the batch for good."""

    def __init__(self, message: str, *, status: int) -> None:
        self.status = status
        super().__init__(message)
