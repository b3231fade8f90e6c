"""The Redis and OpenSearch sinks' view and tombstone settings, and Redis version text."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from connectors.opensearch import OpenSearchSinkConfig
from connectors.redis import RedisSinkConfig
from connectors.redis.scripts import VERSION_DIGITS, version_text

VIEW = {"source": "public.orders", "target": "orders_view"}


def error_at(model: type[BaseModel], settings: dict[str, Any]) -> dict[tuple[Any, ...], str]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(settings)
    return {tuple(error["loc"]): error["msg"] for error in caught.value.errors()}


def test_redis_defaults() -> None:
    config = RedisSinkConfig.model_validate({"url": "redis://h/0"})
    assert (config.mode, config.views, config.timeout) == ("upsert", (), timedelta(seconds=5))
    assert config.tombstone_retention == timedelta(days=7)


def test_redis_views_and_forever_tombstones() -> None:
    config = RedisSinkConfig.model_validate({
        "url": "redis://h/0", "mode": "invalidate", "tombstone_retention": "forever",
        "views": [VIEW, {**VIEW, "target": "summary", "key_template": "sum:{key.id}"}]})
    assert config.tombstone_retention is None
    assert [v.key_template for v in config.views] == [None, "sum:{key.id}"]


@pytest.mark.parametrize(("settings", "loc", "words"), [
    ({"views": [VIEW, {**VIEW, "target": "other"}]}, ("views", 1, "key_template"),
     "writes the same keys (views[0])"),
    ({"views": [{**VIEW, "filter": "a ="}]}, ("views", 0, "filter"), "expected a value"),
    ({"mode": "evict"}, ("mode",), "'upsert' or 'invalidate'"),
    ({"tombstone_retention": "0s"}, ("tombstone_retention",), "expected 'forever' or"),
])
def test_redis_rejects(settings: dict[str, Any], loc: tuple[Any, ...], words: str) -> None:
    assert words in error_at(RedisSinkConfig, {"url": "redis://h/0", **settings})[loc]


def test_opensearch_views_and_tombstones() -> None:
    config = OpenSearchSinkConfig.model_validate({"hosts": ["http://h:9200"], "views": [VIEW],
                                                  "tombstone_retention": "1d"})
    assert config.views[0].target == "orders_view"
    assert config.tombstone_retention == timedelta(days=1)


@pytest.mark.parametrize(("settings", "loc", "words"), [
    ({"views": [VIEW, VIEW]}, ("views", 1, "target"), "another view already writes"),
    ({"views": [{**VIEW, "key_template": "k:{key}"}]}, ("views", 0, "key_template"),
     "only used by the redis sink"),
])
def test_opensearch_rejects(settings: dict[str, Any], loc: tuple[Any, ...], words: str) -> None:
    assert words in error_at(OpenSearchSinkConfig, {"hosts": ["http://h"], **settings})[loc]


def test_version_text_orders_like_the_numbers() -> None:
    versions = [0, 1, 2**53, 2**53 + 1, 2**62, 2**63 - 1] + [
        random.getrandbits(63) for _ in range(200)]
    texts = [version_text(v) for v in versions]
    assert all(len(text) == VERSION_DIGITS for text in texts)
    assert sorted(texts) == [version_text(v) for v in sorted(versions)]
