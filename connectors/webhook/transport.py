"""One keep-alive HTTP(S) connection to the webhook endpoint (stdlib ``http.client``)."""

from __future__ import annotations

import base64
import http.client
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import unquote, urlsplit

from .errors import WebhookUnavailableError

BODY_EXCERPT_CHARS = 200
STALE_CONNECTION = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where batches go; ``shown`` is the URL without userinfo, for messages."""

    scheme: str
    host: str
    port: int | None
    target: str
    shown: str
    authorization: str | None

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        """Split a validated ``http(s)://`` URL; userinfo becomes a Basic auth header."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            netloc += f":{parts.port}"
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        authorization = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        return cls(parts.scheme, host, parts.port, target,
                   f"{parts.scheme}://{netloc}{parts.path or '/'}", authorization)


@dataclass(frozen=True, slots=True)
class Reply:
    """What the endpoint answered."""

    status: int
    reason: str
    retry_after: float | None
    excerpt: str


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class HttpConnection:
    """POSTs bodies over one reused connection; reconnects after any failure."""

    def __init__(self, endpoint: Endpoint, timeout: float) -> None:
        self.endpoint = endpoint
        self._timeout = timeout
        self._connection: http.client.HTTPConnection | None = None

    def connect(self) -> None:
        """Open the connection now (WebhookUnavailableError when unreachable)."""
        try:
            self._open().connect()
        except OSError as exc:
            self.close()
            raise WebhookUnavailableError(
                f"cannot connect to {self.endpoint.shown}: {type(exc).__name__}: {exc}"
            ) from exc

    def _open(self) -> http.client.HTTPConnection:
        if self._connection is None:
            endpoint = self.endpoint
            if endpoint.scheme == "https":
                self._connection = http.client.HTTPSConnection(
                    endpoint.host, endpoint.port, timeout=self._timeout,
                    context=ssl.create_default_context())
            else:
                self._connection = http.client.HTTPConnection(endpoint.host, endpoint.port,
                                                              timeout=self._timeout)
        return self._connection

    def post(self, body: bytes, headers: dict[str, str]) -> Reply:
        """Send one POST and read the whole reply.

        A kept-alive connection the endpoint closed while idle is reopened once at once
        (the receiver may see that batch twice, as after any retry).
        """
        reused = self._connection is not None and self._connection.sock is not None
        try:
            try:
                response, data = self._exchange(body, headers)
            except STALE_CONNECTION:
                if not reused:
                    raise
                self.close()
                response, data = self._exchange(body, headers)
        except (OSError, http.client.HTTPException) as exc:
            raise self._unavailable(exc) from exc
        if response.will_close:
            self.close()
        excerpt = data[:BODY_EXCERPT_CHARS * 4].decode("utf-8", "replace")
        excerpt = " ".join(excerpt.split())[:BODY_EXCERPT_CHARS]
        return Reply(response.status, response.reason,
                     parse_retry_after(response.getheader("Retry-After")), excerpt)

    def _exchange(self, body: bytes, headers: dict[str, str]
                  ) -> tuple[http.client.HTTPResponse, bytes]:
        connection = self._open()
        connection.request("POST", self.endpoint.target, body=body, headers=headers)
        response = connection.getresponse()
        return response, response.read()

    def _unavailable(self, error: BaseException) -> WebhookUnavailableError:
        self.close()
        return WebhookUnavailableError(
            f"POST to {self.endpoint.shown} failed: {type(error).__name__}: {error}")

    def close(self) -> None:
        """Drop the connection."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
