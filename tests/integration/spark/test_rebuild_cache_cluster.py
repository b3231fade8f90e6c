"""``rebuild-cache`` into a real Redis Cluster: every live row's value from the Spark tasks,
each with its version key in the row's hash slot; run again, nothing changes."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, cast

import orjson
import pytest
from redis.cluster import RedisCluster

from cdc.capture.runner import Capture
from cdc.config import load_config
from connectors.redis.config import RedisSinkConfig
from connectors.redis.slots import KeyNames
from spark_pipelines.cache_rebuild import rebuild_cache_table
from spark_pipelines.source import LogSource
from spark_pipelines.state import load_histories
from tests.integration.capture.conftest import CaptureEnv, capture_env, run_capture

from .test_replay_materialize import current_lsn, rows_of, wait_captured, workload

pytestmark = pytest.mark.integration
__all__ = ["capture_env", "run_capture"]


def cluster_state(client: RedisCluster, name: str) -> dict[bytes, tuple[Any, Any]]:
    """Value key → (value, version) of the test's keys."""
    names = KeyNames(cluster=True)
    keys = [key for key in client.scan_iter(match=f"{name}:*", count=1000)]
    return {key: (client.get(key), client.get(names.version_key(key.decode())))
            for key in keys}


def test_rebuild_cache_into_a_redis_cluster(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture], spark: Any,
        redis_cluster: Any, unique_name: str) -> None:
    env = capture_env
    env.config_path.write_text(env.config_path.read_text() + f"""
connectors:
  - name: cache
    type: redis
    topics: [{env.topic('items')}]
    config:
      urls: [{", ".join(redis_cluster.urls)}]
      key_template: "{unique_name}:{{table}}:{{key}}"
""")
    config = load_config(env.config_path)
    cache_config = cast(RedisSinkConfig, config.connectors[0].config)
    env.sql("CREATE TABLE items (id bigint PRIMARY KEY, name text, price numeric(12,2), "
            "at timestamptz, flag bool, note text)")
    run_capture()
    workload(env, random.Random(21), 30, 1, with_note=False)
    wait_captured(env, current_lsn(env))
    source = LogSource.of(config)
    history = load_histories(source)["public.items"]
    client = RedisCluster.from_url(redis_cluster.urls[0])
    try:
        cached = rebuild_cache_table(spark, source, history, cache_config)
        live = {str(row["id"]) for row in rows_of(env)}
        state = cluster_state(client, unique_name)
        assert cached.rows == len(live) == len(state)
        assert {orjson.loads(value)["id"] for value, _ in state.values()} == \
            {int(row_id) for row_id in live}
        assert all(version is not None for _, version in state.values())
        rebuild_cache_table(spark, source, history, cache_config)
        assert cluster_state(client, unique_name) == state, "a second rebuild changes nothing"
    finally:
        doomed = list(client.scan_iter(match=f"*{unique_name}:*", count=1000))
        if doomed:
            client.unlink(*doomed)
        client.close()
