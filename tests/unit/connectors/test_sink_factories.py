"""The OpenSearch and Redis factories: built from a config and a context, not opened."""

from __future__ import annotations

from connectors import opensearch, redis
from connectors.contract import SinkContext
from connectors.opensearch.sink import OpenSearchSink
from connectors.redis.sink import RedisSink


def test_factories_build_unopened_sinks() -> None:
    context = SinkContext(connector="search", topic_prefix="app", worker=1)
    os_config = opensearch.OpenSearchSinkConfig.model_validate({"hosts": ["http://h:9200"]})
    redis_config = redis.RedisSinkConfig.model_validate({"url": "redis://h:6379/0"})
    built = [opensearch.SPEC.factory(os_config, context) if opensearch.SPEC.factory else None,
             redis.SPEC.factory(redis_config, context) if redis.SPEC.factory else None]
    assert isinstance(built[0], OpenSearchSink)
    assert isinstance(built[1], RedisSink)
    for sink in built:
        assert sink is not None
        sink.close()  # closing a sink never opened is harmless

