"""``WebhookSink``: each batch is one signed JSON POST (see ``payload`` for the format).

2xx: written. 408, 425, 429 and 5xx, timeouts and connection failures: transient
(``WebhookUnavailableError``; ``Retry-After`` is honoured). Any other status: the whole
batch is refused (``WebhookRejectedError``), and the runtime splits it to find the
event(s) the endpoint refuses, which go to the dead-letter topic. ``flush`` has nothing
to do: a batch is delivered when its POST got a 2xx.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from connectors.contract import SinkContext, SinkEvent, WriteResult

from .config import WebhookSinkConfig
from .errors import WebhookRejectedError, WebhookUnavailableError
from .payload import encode_batch, sign
from .transport import Endpoint, HttpConnection

RETRIED_STATUSES = frozenset({408, 425, 429})


def _user_agent() -> str:
    try:
        return f"distributary/{version('distributary')}"
    except PackageNotFoundError:
        return "distributary"


class WebhookSink:
    """POSTs batches to ``config.url``."""

    def __init__(self, config: WebhookSinkConfig, context: SinkContext) -> None:
        self._config = config
        self._context = context
        self._connection = HttpConnection(Endpoint.parse(config.url),
                                          config.timeout.total_seconds())
        headers = {name: value.get_secret_value() for name, value in config.headers.items()}
        headers.update({"Content-Type": "application/json", "User-Agent": _user_agent()})
        authorization = self._connection.endpoint.authorization
        if authorization is not None and "authorization" not in {h.lower() for h in headers}:
            headers["Authorization"] = authorization
        self._headers = headers

    def open(self) -> None:
        """Connect to the endpoint (transient error when it is not reachable)."""
        self._connection.connect()

    def write(self, batch: Sequence[SinkEvent]) -> WriteResult:
        """POST ``batch``; raise for anything but a 2xx."""
        if not batch:
            return WriteResult()
        body = encode_batch(self._context.connector, batch)
        headers = dict(self._headers)
        secret = self._config.signing_secret
        if secret is not None:
            headers[self._config.signature_header] = sign(secret.get_secret_value(), body)
        reply = self._connection.post(body, headers)
        if 200 <= reply.status < 300:
            return WriteResult()
        shown = self._connection.endpoint.shown
        what = f"{shown} answered {reply.status} {reply.reason}".rstrip()
        detail = f": {reply.excerpt}" if reply.excerpt else ""
        if reply.status in RETRIED_STATUSES or reply.status >= 500:
            raise WebhookUnavailableError(what + detail, status=reply.status,
                                          retry_after=reply.retry_after)
        raise WebhookRejectedError(what + detail, status=reply.status)

    def flush(self) -> None:
        """Nothing to do: every write was acknowledged by its response."""

    def close(self) -> None:
        """Close the connection."""
        self._connection.close()
