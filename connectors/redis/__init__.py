"""The Redis sink: keys from a template, JSON or hash values, versioned compare-and-set.

The config model imports nothing but pydantic, so pipelines validate without the
``redis`` extra; the factory imports redis-py when a sink is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from connectors.contract import SinkContext
from connectors.redis.config import RedisSinkConfig
from connectors.registry import SinkSpec

if TYPE_CHECKING:
    from connectors.redis.sink import RedisSink


def create(config: RedisSinkConfig, context: SinkContext) -> RedisSink:
    """Build the sink of one worker (``SinkSpec.factory``); see ``sink.create``."""
    try:
        from connectors.redis import sink
    except ImportError as exc:
        raise ImportError("the redis sink needs redis-py: pip install 'distributary[redis]'") \
            from exc
    return sink.create(config, context)


SPEC = SinkSpec(name="redis", config_model=RedisSinkConfig, factory=create)

__all__ = ["SPEC", "RedisSinkConfig", "create"]
