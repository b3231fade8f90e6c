"""Smoke test: the launched Redis answers set/get, pipelines and Lua (the sink's needs)."""

from __future__ import annotations

import redis


def test_set_get_pipeline_and_lua(redis_url: str, unique_name: str) -> None:
    client = redis.Redis.from_url(redis_url)
    key = f"{unique_name}:orders:1"
    assert client.set(key, b'{"id": 1}') is True
    assert client.get(key) == b'{"id": 1}'
    with client.pipeline() as pipe:
        for i in range(10):
            pipe.set(f"{unique_name}:p:{i}", i)
        pipe.delete(key)
        results = pipe.execute()
    assert results == [True] * 10 + [1]
    assert client.get(key) is None
    newer_only = client.register_script(
        "local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '-1') "
        "if tonumber(ARGV[1]) > v then redis.call('HSET', KEYS[1], 'v', ARGV[1]) return 1 end "
        "return 0")
    assert newer_only(keys=[f"{unique_name}:cas"], args=[5]) == 1
    assert newer_only(keys=[f"{unique_name}:cas"], args=[3]) == 0
    stored: object = client.hget(f"{unique_name}:cas", "v")
    assert stored == b"5"
    client.close()
