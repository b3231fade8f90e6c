"""``cdc replay rebuild-search`` and ``rebuild-cache`` against the streaming sinks: the
rebuilt documents and keys equal what the OpenSearch and Redis sinks write for the same
events, and an alias swap while the capture and the streaming sink keep running loses no
write."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
import redis
from opensearchpy import OpenSearch
from psycopg.rows import dict_row

from cdc.capture.runner import Capture
from cdc.config import load_config
from cdc.log import StartAt
from cdc.log.file import FileLog
from connectors.contract import Sink
from connectors.opensearch.config import OpenSearchSinkConfig
from connectors.opensearch.sink import OpenSearchSink
from connectors.redis.config import RedisSinkConfig
from connectors.redis.sink import RedisSink
from connectors.runtime.events import decode_batch
from tests.integration.capture.conftest import CaptureEnv, capture_env, run_capture

from .test_replay_materialize import current_lsn, replay, wait_captured, workload

pytestmark = pytest.mark.integration
__all__ = ["capture_env", "run_capture"]

TABLE = "public.items"


def add_connectors(env: CaptureEnv, opensearch_url: str, redis_url: str, name: str) -> None:
    env.config_path.write_text(env.config_path.read_text() + f"""
connectors:
  - name: search
    type: opensearch
    topics: [{env.topic('items')}]
    config:
      hosts: [{opensearch_url}]
      index: "{name}_{{table}}"
      verify_certs: false
      views:
        - source: public.items
          target: {name}_flagged
          fields: [id, name, price, note]
          rename: {{name: title}}
          computed: {{label: "concat(name, ' #', id)"}}
          filter: "flag = true"
  - name: cache
    type: redis
    topics: [{env.topic('items')}]
    config:
      url: {redis_url}
      key_template: "{name}:{{table}}:{{key}}"
""")


@contextmanager
def streaming(env: CaptureEnv, sink: Sink) -> Iterator[threading.Event]:
    """Feed ``sink`` from the table's topic in a thread, as a connector does."""
    stop = threading.Event()
    log = FileLog(env.log_dir)
    consumer = log.consumer(f"stream-{time.monotonic_ns()}", topics=[env.topic("items")],
                            start=StartAt.earliest())
    sink.open()
    idle = threading.Event()

    def run() -> None:
        while not stop.is_set():
            messages = consumer.poll(500, timeout=0.2)
            if messages:
                idle.clear()
                result = sink.write(decode_batch(messages).events)
                assert not result.rejected, result.rejected
            else:
                idle.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield idle
    finally:
        stop.set()
        thread.join(timeout=30)
        consumer.close()
        sink.close()
        log.close()


def documents(client: OpenSearch, alias: str) -> dict[str, tuple[dict[str, Any], int]]:
    client.indices.refresh(index=alias)
    hits = client.search(index=alias, body={"query": {"match_all": {}}, "size": 10_000,
                                            "version": True})["hits"]["hits"]
    return {hit["_id"]: (hit["_source"], hit["_version"]) for hit in hits}


def redis_state(client: redis.Redis, name: str) -> dict[bytes, bytes | None]:
    keys = sorted(key for key in client.scan_iter(match=f"*{name}:*", count=1000)
                  if not key.startswith(b"_cdc_truncated:"))
    return {key: cast(bytes | None, client.get(key)) for key in keys}


def settle(env: CaptureEnv, idle: threading.Event) -> None:
    wait_captured(env, current_lsn(env))
    time.sleep(0.5)
    assert idle.wait(30)


def test_rebuilds_equal_the_streaming_sinks(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture], spark: Any,
        opensearch_url: str, redis_url: str, unique_name: str, tmp_path: Path) -> None:
    env = capture_env
    add_connectors(env, opensearch_url, redis_url, unique_name)
    config = load_config(env.config_path)
    search_config = cast(OpenSearchSinkConfig, config.connectors[0].config)
    cache_config = cast(RedisSinkConfig, config.connectors[1].config)
    env.sql("CREATE TABLE items (id bigint PRIMARY KEY, name text, price numeric(12,2), "
            "at timestamptz, flag bool)")
    run_capture()
    rng = random.Random(7)
    client = OpenSearch(hosts=[opensearch_url])
    cache = redis.Redis.from_url(redis_url)
    alias = f"{unique_name}_flagged"
    search_sink = OpenSearchSink(search_config, topic_prefix=env.slot)
    with streaming(env, search_sink) as idle, \
            streaming(env, RedisSink(cache_config, topic_prefix=env.slot)) as cache_idle:
        workload(env, rng, 8, 1, with_note=False)
        env.sql("TRUNCATE items")
        workload(env, rng, 6, 1000, with_note=False)
        env.sql("ALTER TABLE items ADD COLUMN note text")
        workload(env, rng, 6, 2000, with_note=True)
        settle(env, idle)
        settle(env, cache_idle)
        streamed = documents(client, alias)
        streamed_cache = redis_state(cache, unique_name)
        assert streamed and streamed_cache

        old_index = next(iter(client.indices.get_alias(name=alias)))
        # the rebuild, while the capture and the streaming sink keep going
        writer = threading.Thread(target=workload, args=(env, random.Random(8), 15, 3000,
                                                         True))
        writer.start()
        replay("rebuild-search", "-c", str(env.config_path), "--tables", TABLE)
        writer.join()
        settle(env, idle)
        with psycopg.connect(env.dsn, row_factory=dict_row) as conn:
            rows = list(conn.execute("SELECT * FROM items"))
        rebuilt = documents(client, alias)
        want = {str(r["id"]) for r in rows if r["flag"]}
        assert set(rebuilt) == want, "a write was lost or resurrected around the swap"
        for row in rows:
            if row["flag"]:
                source, _ = rebuilt[str(row["id"])]
                assert source["title"] == row["name"]
                assert source["price"] == str(row["price"])
        behind = client.indices.get_alias(name=alias)
        assert len(behind) == 1 and next(iter(behind)).startswith(f"{alias}_rebuild_")
        assert client.indices.exists(index=old_index), "the old index is kept"

    # with nothing running, a rebuild gives exactly the streamed documents
    final = documents(client, alias)
    first_rebuild = next(iter(client.indices.get_alias(name=alias)))
    replay("rebuild-search", "-c", str(env.config_path), "--tables", TABLE, "--drop-old")
    assert documents(client, alias) == final
    assert not client.indices.exists(index=first_rebuild), "--drop-old deletes the old index"

    streamed_cache = redis_state(cache, unique_name)
    for key in cache.scan_iter(match=f"*{unique_name}:*", count=1000):
        if not key.startswith(b"_cdc_truncated:"):
            cache.delete(key)
    replay("rebuild-cache", "-c", str(env.config_path), "--tables", TABLE)
    rebuilt_cache = redis_state(cache, unique_name)
    values = {k: v for k, v in rebuilt_cache.items() if not k.startswith(b"_cdc_")}
    assert values == {k: v for k, v in streamed_cache.items() if not k.startswith(b"_cdc_")}
    versions = {k for k in rebuilt_cache if k.startswith(b"_cdc_version:")}
    assert versions and versions <= set(streamed_cache)
