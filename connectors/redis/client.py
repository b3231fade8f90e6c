"""The redis-py client of a Redis sink's config: ``redis.Redis`` for ``url``, redis-py's
own ``RedisCluster`` for ``urls`` (it follows ``MOVED``/``ASK`` and reads the slot map
again after a failover)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

from .config import RedisSinkConfig

Client = redis.Redis | RedisCluster


def make_client(config: RedisSinkConfig, *, retries: int = 0) -> Client:
    """A client of the config's Redis (not connected yet) that retries a failed command
    ``retries`` times (the sink: never, the runtime's retry layer is the only one)."""
    timeout = config.timeout.total_seconds()
    password = config.password.get_secret_value() if config.password else None
    retry = Retry(NoBackoff(), retries)
    if config.url is not None:
        return redis.Redis.from_url(config.url, password=password, socket_timeout=timeout,
                                    socket_connect_timeout=timeout, retry=retry)
    first, *others = config.urls
    extra: dict[str, Any] = {"password": password} if password else {}
    return RedisCluster(url=first, startup_nodes=[_node(url) for url in others],
                        socket_timeout=timeout, socket_connect_timeout=timeout, retry=retry,
                        **extra)


def address(config: RedisSinkConfig) -> str:
    """Where the config points (host:port, or the socket path), without credentials."""
    return ", ".join(_address(url) for url in config.seeds)


def _node(url: str) -> ClusterNode:
    parts = urlsplit(url)
    return ClusterNode(parts.hostname, parts.port or 6379)  # type: ignore[no-untyped-call]


def _address(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return parts.path
    return f"{parts.hostname}:{parts.port or 6379}"
