"""``cdc replay rebuild-search`` and ``rebuild-cache`` against the streaming sinks: the
rebuilt documents and keys equal what the OpenSearch and Redis sinks write for the same
events, and an alias swap while the capture and the streaming sink keep running loses no
write. The rows are written by the Spark tasks (their counts come back from worker
processes, one per partition), and the catch-up reads only what follows the offsets the
rebuild noted, on both log backends."""

from __future__ import annotations

import os
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
from cdc.log import Position, Record, StartAt
from cdc.log.file import FileLog
from cdc.log.kafka import KafkaLog
from connectors.contract import Sink
from connectors.opensearch.config import OpenSearchSinkConfig
from connectors.opensearch.sink import OpenSearchSink
from connectors.redis.config import RedisSinkConfig
from connectors.redis.sink import RedisSink
from connectors.runtime.events import decode_batch
from spark_pipelines.cache_rebuild import rebuild_cache_table
from spark_pipelines.columnar import plan
from spark_pipelines.log_range import read_range
from spark_pipelines.search_rebuild import catch_up, rebuild_table
from spark_pipelines.source import LogSource
from spark_pipelines.state import load_histories
from spark_pipelines.task_writes import TaskCounts
from tests.integration.capture.conftest import CaptureEnv, capture_env, run_capture
from tests.integration.connectors.harness import wait_until

from .test_columnar import columnar
from .test_replay_materialize import current_lsn, replay, rows_of, wait_captured, workload

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


class Feed:
    """What the thread of ``streaming`` has written to its sink: the next offset of each
    partition of the topic, and the error that stopped it, if one did."""

    def __init__(self, log: FileLog, topic: str) -> None:
        self.log, self.topic = log, topic
        self.written: dict[int, int] = {}
        self.error: BaseException | None = None

    def caught_up(self) -> bool:
        """True once the sink has written every record the topic holds now."""
        assert self.error is None, f"the streaming sink failed: {self.error!r}"
        return all(self.written.get(p.partition, p.start_offset) >= p.end_offset
                   for p in self.log.admin().partitions(self.topic))


@contextmanager
def streaming(env: CaptureEnv, sink: Sink) -> Iterator[Feed]:
    """Feed ``sink`` from the table's topic in a thread, as a connector does."""
    stop = threading.Event()
    log = FileLog(env.log_dir)
    consumer = log.consumer(f"stream-{time.monotonic_ns()}", topics=[env.topic("items")],
                            start=StartAt.earliest())
    sink.open()
    feed = Feed(log, env.topic("items"))

    def run() -> None:
        try:
            while not stop.is_set():
                messages = consumer.poll(500, timeout=0.2)
                if messages:
                    result = sink.write(decode_batch(messages).events)
                    assert not result.rejected, result.rejected
                    for message in messages:
                        feed.written[message.partition] = max(
                            feed.written.get(message.partition, 0), message.offset + 1)
        except BaseException as exc:  # reported by Feed.caught_up
            feed.error = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield feed
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


def settle(env: CaptureEnv, feed: Feed) -> None:
    """Wait until everything committed so far is in the log and written by the sink."""
    wait_captured(env, current_lsn(env))
    wait_until(feed.caught_up, timeout=30,
               what=f"the streaming sink writes {feed.topic} up to its end offsets")


def test_rebuilds_equal_the_streaming_sinks(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture], spark: Any,
        opensearch_url: str, redis_url: str, unique_name: str, tmp_path: Path) -> None:
    env = capture_env
    env.config_path.write_text(env.config_path.read_text()  # sealed segments: companions
                               + "  segment_bytes: 4KiB\n")
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
    with streaming(env, search_sink) as search_feed, \
            streaming(env, RedisSink(cache_config, topic_prefix=env.slot)) as cache_feed:
        workload(env, rng, 8, 1, with_note=False)
        env.sql("TRUNCATE items")
        workload(env, rng, 6, 1000, with_note=False)
        env.sql("ALTER TABLE items ADD COLUMN note text")
        workload(env, rng, 6, 2000, with_note=True)
        settle(env, search_feed)
        settle(env, cache_feed)
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
        settle(env, search_feed)
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

    # the same rebuilds again, reading the log's columnar companions
    assert f"{env.topic('items')}: written=" in columnar(env)
    assert plan(env.log_dir, env.topic("items"), {p: 1 << 62 for p in range(3)}).companions
    for key in cache.scan_iter(match=f"*{unique_name}:*", count=1000):
        if not key.startswith(b"_cdc_truncated:"):
            cache.delete(key)
    replay("rebuild-cache", "-c", str(env.config_path), "--tables", TABLE)
    assert redis_state(cache, unique_name) == rebuilt_cache
    replay("rebuild-search", "-c", str(env.config_path), "--tables", TABLE, "--drop-old")
    assert documents(client, alias) == final


def assert_written_by_tasks(counts: TaskCounts | None, rows: int) -> None:
    """Every row came from a Spark task in a Python worker, at least two tasks wrote."""
    assert counts is not None
    busy = [task for task in counts.tasks if task.rows]
    assert len(busy) >= 2, counts
    assert sum(task.rows for task in counts.tasks) == rows
    assert all(task.pid != os.getpid() and task.stage >= 0 and task.attempt >= 0
               for task in counts.tasks), "a count did not come from an executor task"
    assert len({task.partition for task in busy}) == len(busy)


def test_rebuilds_write_from_the_tasks_and_catch_up_from_the_noted_offsets(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture], spark: Any,
        opensearch_url: str, redis_url: str, unique_name: str) -> None:
    env = capture_env
    add_connectors(env, opensearch_url, redis_url, unique_name)
    config = load_config(env.config_path)
    search_config = cast(OpenSearchSinkConfig, config.connectors[0].config)
    cache_config = cast(RedisSinkConfig, config.connectors[1].config)
    env.sql("CREATE TABLE items (id bigint PRIMARY KEY, name text, price numeric(12,2), "
            "at timestamptz, flag bool, note text)")
    run_capture()
    workload(env, random.Random(11), 20, 1, with_note=True)
    wait_captured(env, current_lsn(env))
    source = LogSource.of(config)
    topic = env.topic("items")
    history = load_histories(source)[TABLE]
    client = OpenSearch(hosts=[opensearch_url])
    cache = redis.Redis.from_url(redis_url)
    alias = f"{unique_name}_flagged"

    [search] = rebuild_table(spark, source, history, search_config, drop_old=False,
                             stamp="tasks")
    live = rows_of(env)
    assert_written_by_tasks(search.tasks, len(live))
    flagged = {str(row["id"]) for row in live if row["flag"]}
    assert search.rows == len(flagged) and set(documents(client, alias)) == flagged
    assert "written by" in str(search.path)

    cached = rebuild_cache_table(spark, source, history, cache_config)
    deleted = cached.tasks.deleted if cached.tasks else 0
    assert_written_by_tasks(cached.tasks, len(live) + deleted)
    values = {k for k in redis_state(cache, unique_name) if not k.startswith(b"_cdc_")}
    assert cached.rows == len(live) == len(values)

    # the catch-up reads from the offsets noted before: only what was appended since
    noted = source.end_offsets(topic)
    workload(env, random.Random(12), 8, 5000, with_note=True)
    wait_captured(env, current_lsn(env))
    now = source.end_offsets(topic)
    appended = sum(end - noted.get(p, 0) for p, end in now.items())
    assert 0 < appended < sum(now.values())
    read = list(read_range(source, topic, noted, now))
    assert len(read) == appended
    assert all(noted.get(m.partition, 0) <= m.offset < now[m.partition] for m in read)
    log = source.open_log()
    try:
        assert catch_up(log, source, topic, noted, search_config, "tasks") == appended
    finally:
        log.close()
    assert set(documents(client, alias)) == {str(r["id"]) for r in rows_of(env) if r["flag"]}


def _ranges(source: LogSource, topic: str) -> None:
    got = list(read_range(source, topic, {0: 3, 1: 5}, {0: 8, 1: 9, 2: 4}))
    assert [(m.partition, m.offset) for m in got] == (
        [(0, o) for o in range(3, 8)] + [(1, o) for o in range(5, 9)]
        + [(2, o) for o in range(4)])
    assert all(m.value == b'{"p":%d,"o":%d}' % (m.partition, m.offset) for m in got)


def _fill(log: Any, topic: str) -> None:
    """Ten records in each of three partitions; the caller closes the log (its producer)."""
    log.admin().create_topic(topic, 3)
    producer = log.producer()
    producer.append([Record(topic, b'"k"', b'{"p":%d,"o":%d}' % (p, o), Position(o + 1, p),
                            partition=p) for p in range(3) for o in range(10)])


def test_read_range_starts_at_the_given_offsets_on_both_backends(
        tmp_path: Path, kafka_bootstrap: str, unique_name: str) -> None:
    topic = f"{unique_name}.public.items"
    file_log = FileLog(tmp_path / "log")
    try:
        _fill(file_log, topic)
    finally:
        file_log.close()
    _ranges(LogSource("file", unique_name, path=tmp_path / "log"), topic)
    kafka_log = KafkaLog([kafka_bootstrap])
    try:
        _fill(kafka_log, topic)
    finally:
        kafka_log.close()
    _ranges(LogSource("kafka", unique_name, bootstrap_servers=(kafka_bootstrap,)), topic)
