"""The built-in sinks' config models, on their own."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from connectors.opensearch import OpenSearchSinkConfig
from connectors.redis import RedisSinkConfig
from connectors.webhook import WebhookSinkConfig


def error_at(model: type[BaseModel], settings: dict[str, Any]) -> dict[tuple[Any, ...], str]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(settings)
    return {tuple(error["loc"]): error["msg"] for error in caught.value.errors()}


def test_opensearch_full() -> None:
    config = OpenSearchSinkConfig.model_validate({
        "hosts": ["https://search-1:9200", "https://search-2:9200"], "username": "admin",
        "password": "pw", "index": "{prefix}_{schema}_{table}", "alias": "{table}",
        "bulk_size": 1000, "bulk_max_bytes": "10MiB", "ca_certs": "/etc/ssl/ca.pem",
        "request_timeout": "1m"})
    assert config.bulk_max_bytes == 10 * 1024**2
    assert config.request_timeout == timedelta(minutes=1)
    assert "pw" not in repr(config)


@pytest.mark.parametrize(("settings", "loc", "words"), [
    ({"hosts": []}, ("hosts",), "at least 1 item"),
    ({"hosts": ["search:9200"]}, ("hosts", 0), "http:// or https://"),
    ({"hosts": ["http://h"], "index": "Orders"}, ("index",), "lowercase"),
    ({"hosts": ["http://h"], "index": "{tabel}"}, ("index",), "unknown placeholder {tabel}"),
    ({"hosts": ["http://h"], "index": "_{table}"}, ("index",), "not starting with"),
    ({"hosts": ["http://h"], "index": "{table"}, ("index",), "expected a template"),
    ({"hosts": ["http://h"], "alias": "{table}"}, ("alias",), "must differ from index"),
    ({"hosts": ["http://h"], "verify_certs": False, "ca_certs": "/ca.pem"}, ("ca_certs",),
     "only used when verify_certs is true"),
    ({"hosts": ["http://h"], "password": "x"}, ("username",), "required when password"),
])
def test_opensearch_rejects(settings: dict[str, Any], loc: tuple[Any, ...], words: str) -> None:
    assert words in error_at(OpenSearchSinkConfig, settings)[loc]


def test_redis_full() -> None:
    config = RedisSinkConfig.model_validate({
        "url": "rediss://cache:6380/1", "password": "pw", "key_template": "{table}:{key.id}",
        "value_format": "hash", "ttl": "1h"})
    assert config.ttl == timedelta(hours=1)
    assert config.key_template == "{table}:{key.id}"


@pytest.mark.parametrize(("settings", "loc", "words"), [
    ({}, ("url",), "give url: redis://host:6379/0, or urls:"),
    ({"url": "http://cache:6379"}, ("url",), "redis://"),
    ({"url": "redis://h:port/0"}, ("url",), "cannot be parsed"),
    ({"url": "redis://h/0", "key_template": "{row.id}"}, ("key_template",),
     "unknown placeholder {row.id}"),
    ({"url": "redis://h/0", "value_format": "xml"}, ("value_format",), "'json' or 'hash'"),
    ({"url": "redis://h/0", "ttl": "0s"}, ("ttl",), "greater than zero"),
    ({"url": "redis://:a@h/0", "password": "b"}, ("password",), "already contains a password"),
])
def test_redis_rejects(settings: dict[str, Any], loc: tuple[Any, ...], words: str) -> None:
    assert words in error_at(RedisSinkConfig, settings)[loc]


def test_webhook_full() -> None:
    config = WebhookSinkConfig.model_validate({
        "url": "https://hooks.example/cdc", "headers": {"Authorization": "Bearer t"},
        "signing_secret": "s", "timeout": "5s"})
    assert config.headers["Authorization"].get_secret_value() == "Bearer t"
    assert "Bearer" not in repr(config)


@pytest.mark.parametrize(("settings", "loc", "words"), [
    ({"url": "hooks.example"}, ("url",), "http:// or https://"),
    ({"url": "https://h", "headers": {"Bad Header": "x"}}, ("headers", "Bad Header", "[key]"),
     "HTTP header name"),
    ({"url": "https://h", "signing_secret": "s", "headers": {"x-distributary-signature": "v"}},
     ("signature_header",), "also set in headers"),
])
def test_webhook_rejects(settings: dict[str, Any], loc: tuple[Any, ...], words: str) -> None:
    assert words in error_at(WebhookSinkConfig, settings)[loc]
