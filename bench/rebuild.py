"""Rebuilds written by the Spark executors against plain writers of the same DataFrame
(``make bench-rebuild``).

A file log of 3 M events over 1 M keys (``bench.spark``'s table ``orders``: every key
inserted, then updates of random keys, 2 % deletes) is materialized once on ``local[2]``
(``text_state`` with deletes, cached, dealt over the two cores by ``spread``); every
writer below takes that same cached DataFrame:

- ``rebuild-search``'s write phase (``search_rebuild.load``): the index created behind a
  temporary alias, then one ``OpenSearchSink`` per task, external versions, bulk of 500;
  its reference is ``foreachPartition`` with plain ``opensearch-py`` ``helpers.bulk``
  (same bulk size, an index with the same settings and mapping, no versions);
- ``rebuild-cache``'s write (``task_writes`` with ``cache_rebuild.CacheRecipe``): one
  ``RedisSink`` per task, the Lua version guard, batches of 500; its reference is
  ``foreachPartition`` with pipelined redis-py ``SET``/``DEL`` of the same rows.

Both run in Python workers that already imported everything (``warm_workers``), and each
writer has OpenSearch to itself: an index is deleted once checked, so no merge of it runs
during the next writer's turn. Each ratio is reference time / rebuild time (1.0: as
fast; target ≥ 0.8). The servers come from ``compose.launcher``. ``BENCH_SCALE``
(default 1.0) scales the log and keys.
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import redis
from opensearchpy import OpenSearch, helpers
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from compose.launcher import OpenSearchServer, RedisServer
from connectors.opensearch.config import OpenSearchSinkConfig
from connectors.placeholders import TableNames
from connectors.redis.config import RedisSinkConfig
from spark_pipelines.cache_rebuild import BATCH, WRITTEN, CacheRecipe
from spark_pipelines.materialize import KEY_COLUMN, OP_COLUMN, POSITION_COLUMNS, VERSION_COLUMN
from spark_pipelines.search_rebuild import alias_plans, load, rebuild_config
from spark_pipelines.session import spark_session
from spark_pipelines.source import LogSource
from spark_pipelines.state import TableHistory, load_histories, text_state
from spark_pipelines.task_writes import ShippedConfig, StateFeed, spread, write_from_tasks

from .spark import PREFIX, TABLE, TOPIC, write_log

SCALE = float(os.environ.get("BENCH_SCALE", "1.0"))
KEYS = max(1_000, int(1_000_000 * SCALE))
EVENTS = 3 * KEYS
INTERNAL = {KEY_COLUMN, OP_COLUMN, VERSION_COLUMN, *POSITION_COLUMNS}


def plain_documents(rows: Iterable[Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(op, id, row) of each state row, its columns as Spark gives them."""
    for row in rows:
        values = row.asDict()
        yield (str(values[OP_COLUMN]), str(values["id"]),
               {k: v for k, v in values.items() if k not in INTERNAL})


def plain_bulk(url: str, index: str) -> Callable[[Iterable[Any]], None]:
    """A ``foreachPartition`` writer: ``helpers.bulk`` of the partition's rows."""
    def write(rows: Iterable[Any]) -> None:
        client = OpenSearch([url], timeout=120)
        actions = ({"_op_type": "index", "_index": index, "_id": key, "_source": doc}
                   for op, key, doc in plain_documents(rows) if op != "d")
        helpers.bulk(client, actions, chunk_size=BATCH, raise_on_error=True)
        client.close()
    return write


def plain_pipeline(url: str) -> Callable[[Iterable[Any]], None]:
    """A ``foreachPartition`` writer: pipelined ``SET``/``DEL`` of the partition's rows."""
    def write(rows: Iterable[Any]) -> None:
        client = redis.Redis.from_url(url)
        pipe = client.pipeline(transaction=False)
        for number, (op, key, doc) in enumerate(plain_documents(rows), 1):
            if op == "d":
                pipe.delete(f"plain:{key}")
            else:
                pipe.set(f"plain:{key}", orjson.dumps(doc))
            if number % BATCH == 0:
                pipe.execute()
        pipe.execute()
        client.close()
    return write


def warm_workers(rows: Iterable[Any]) -> Iterator[int]:
    """A task importing what every writer uses, so no timed run pays the imports (the
    Python workers are reused)."""
    for module in ("opensearchpy.helpers", "redis", "spark_pipelines.search_tasks",
                   "spark_pipelines.cache_rebuild"):
        importlib.import_module(module)
    yield sum(1 for _ in rows)


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def bench_search(state: DataFrame, source: LogSource, history: TableHistory, url: str) -> None:
    """``rebuild-search``'s write phase against ``helpers.bulk`` from the tasks."""
    documents = state.where(F.col(OP_COLUMN) != "d")
    config = OpenSearchSinkConfig.model_validate({"hosts": [url], "index": "orders",
                                                  "bulk_size": BATCH})
    names = TableNames(PREFIX, TOPIC, history.newest.schema, history.newest.table)
    plans = alias_plans(config, names, "bench")
    client = OpenSearch([url], timeout=120)
    helpers.bulk(client, ({"_index": "warmup", "_id": str(n), "_source": {"n": n}}
                          for n in range(20_000)), chunk_size=BATCH)
    client.indices.delete(index="warmup")
    log = source.open_log()
    try:
        rebuild_s, counts = timed(lambda: load(documents, history, TOPIC, log, source,
                                               rebuild_config(config, plans), plans, client))
    finally:
        log.close()
    new = f"{plans[0].temporary}-1"
    client.indices.refresh(index=new)
    written = counts.total(plans[0].alias)
    assert int(client.count(index=new)["count"]) == written, "documents missing"
    settings = client.indices.get_settings(index=new)[new]["settings"]["index"]
    mappings = client.indices.get_mapping(index=new)[new]["mappings"]
    # each writer gets OpenSearch to itself: no merges of the other's index meanwhile
    client.indices.delete(index=new)
    client.indices.create(index="plain", body={
        "settings": {k: settings[k] for k in ("number_of_shards", "number_of_replicas",
                                              "refresh_interval") if k in settings},
        "mappings": mappings})
    plain_s, _ = timed(lambda: documents.foreachPartition(plain_bulk(url, "plain")))
    client.indices.delete(index="plain")  # nor during the cache's runs
    client.close()
    print(f"rebuild_search_tasks={len([t for t in counts.tasks if t.rows])}")
    print(f"plain_search_docs_per_s={written / plain_s:.0f}")
    print(f"rebuild_search_docs_per_s={written / rebuild_s:.0f}")
    print(f"rebuild_search_ratio_vs_plain={plain_s / rebuild_s:.2f}", flush=True)


def bench_cache(state: DataFrame, source: LogSource, history: TableHistory, url: str) -> None:
    """``rebuild-cache``'s write against pipelined ``SET``/``DEL`` from the tasks."""
    config = RedisSinkConfig.model_validate({"url": url, "key_template": "orders:{key}"})
    feed = StateFeed(history, TOPIC, BATCH, CacheRecipe(ShippedConfig.of(config),
                                                        source.topic_prefix))
    rebuild_s, counts = timed(lambda: write_from_tasks(state, feed))
    counts.check("Redis", "write(s)", TABLE)
    plain_s, _ = timed(lambda: state.foreachPartition(plain_pipeline(url)))
    sample = state.where(F.col(OP_COLUMN) != "d").select("id").limit(100).collect()
    client = redis.Redis.from_url(url)
    assert all(client.exists(f"orders:{row['id']}", f"plain:{row['id']}") == 2
               for row in sample), "keys missing"
    client.close()
    print(f"rebuild_cache_values={counts.total(WRITTEN)} deletes={counts.deleted}")
    print(f"plain_cache_keys_per_s={counts.rows / plain_s:.0f}")
    print(f"rebuild_cache_keys_per_s={counts.rows / rebuild_s:.0f}")
    print(f"rebuild_cache_ratio_vs_plain={plain_s / rebuild_s:.2f}", flush=True)


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-rebuild-"))
    try:
        generated_s, _ = timed(lambda: write_log(workdir / "log", EVENTS, KEYS))
        print(f"rebuild_scale={SCALE} events={EVENTS} keys={KEYS}")
        print(f"rebuild_log_generation_s={generated_s:.1f}", flush=True)
        source = LogSource("file", PREFIX, path=workdir / "log")
        conf = {"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "8",
                "spark.local.dir": str(workdir / "spark-tmp")}
        with OpenSearchServer() as search_server, RedisServer() as redis_server, \
                spark_session("local[2]", conf, app_name="bench-rebuild") as spark:
            history = load_histories(source)[TABLE]
            ends = source.end_offsets(TOPIC)
            state = spread(text_state(spark, source, history, ends, with_deletes=True)
                           .where(F.col(OP_COLUMN) != "t")).persist(StorageLevel.MEMORY_AND_DISK)
            state_s, rows = timed(state.count)
            state.rdd.mapPartitions(warm_workers).collect()
            print(f"rebuild_state_rows={rows}")
            print(f"rebuild_state_s={state_s:.1f}", flush=True)
            bench_search(state, source, history, search_server.url)
            bench_cache(state, source, history, redis_server.url)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
