"""The webhook's body, signature, endpoint parsing and Retry-After (no network)."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime

import orjson
import pytest

from cdc.log import Message, Position
from connectors.contract import SinkEvent, version_of
from connectors.webhook import sign, signature_matches
from connectors.webhook.payload import encode_batch
from connectors.webhook.transport import Endpoint, parse_retry_after


def sink_event(key: int, value: bytes) -> SinkEvent:
    message = Message("app.public.orders", 2, 17, 0, b'{"id":%d}' % key, value,
                      Position(0x16B37A0, 3), False)
    return SinkEvent(message, orjson.loads(value), version_of(0x16B37A0, 3))


def test_the_body_embeds_each_event_as_logged() -> None:
    value = b'{"op":"c","key":{"id":1},"after":{"id":1,"amount":"12.50"}}'
    body = encode_batch("hooks", [sink_event(1, value)])
    assert body == (b'{"connector":"hooks","events":[{"topic":"app.public.orders",'
                    b'"partition":2,"offset":17,"version":%d,"event":%s}]}'
                    % (version_of(0x16B37A0, 3), value))


def test_signature_is_hmac_sha256_of_the_body() -> None:
    body = b'{"connector":"hooks","events":[]}'
    expected = hmac.new(b"key", body, hashlib.sha256).hexdigest()
    assert sign("key", body) == f"sha256={expected}"
    assert signature_matches("key", body, f"sha256={expected}")
    assert not signature_matches("key", body + b" ", f"sha256={expected}")
    assert not signature_matches("other", body, f"sha256={expected}")


def test_endpoint_hides_userinfo_and_keeps_the_query() -> None:
    endpoint = Endpoint.parse("https://bot:p%40ss@hooks.example.com:8443/in/cdc?team=search")
    assert (endpoint.scheme, endpoint.host, endpoint.port) == ("https", "hooks.example.com", 8443)
    assert endpoint.target == "/in/cdc?team=search"
    assert endpoint.shown == "https://hooks.example.com:8443/in/cdc"
    assert endpoint.authorization == "Basic Ym90OnBAc3M="  # bot:p@ss


def test_endpoint_defaults() -> None:
    endpoint = Endpoint.parse("http://[::1]")
    assert (endpoint.host, endpoint.port, endpoint.target) == ("::1", None, "/")
    assert endpoint.shown == "http://[::1]/" and endpoint.authorization is None


@pytest.mark.parametrize(("header", "seconds"), [
    ("120", 120.0), (" 5 ", 5.0), ("Wed, 21 Oct 2026 07:28:30 GMT", 30.0),
    ("Wed, 21 Oct 2026 07:27:00 GMT", 0.0), ("soon", None), ("", None), (None, None)])
def test_retry_after(header: str | None, seconds: float | None) -> None:
    now = datetime(2026, 10, 21, 7, 28, 0, tzinfo=UTC)
    assert parse_retry_after(header, now) == seconds
