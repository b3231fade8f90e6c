"""The Redis sink's client retries nothing by itself (the runtime's retry layer does)."""

from __future__ import annotations

import pytest
from redis import Redis
from redis.connection import Connection

from connectors.redis import RedisSinkConfig
from connectors.redis.client import make_client


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0",
                                 "redis://127.0.0.1:1/0?retry_on_timeout=true"])
def test_the_client_never_retries(url: str) -> None:
    client = make_client(RedisSinkConfig.model_validate({"url": url}))
    try:
        assert isinstance(client, Redis)
        connection = client.connection_pool.make_connection()
        assert isinstance(connection, Connection)
        assert connection.retry.get_retries() == 0
        assert connection.socket_timeout == connection.socket_connect_timeout == 5.0
    finally:
        client.close()
