"""The Redis sink: keys from a template, versioned compare-and-set (the sink itself comes later)."""

from connectors.redis.config import RedisSinkConfig
from connectors.registry import SinkSpec

SPEC = SinkSpec(name="redis", config_model=RedisSinkConfig, factory=None)

__all__ = ["SPEC", "RedisSinkConfig"]
