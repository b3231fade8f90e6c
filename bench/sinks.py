"""Sink throughput against plain client loops on the same documents (``make bench-sinks``).

500,000 change events (``BENCH_SCALE`` scales the count; 80 % upserts, 20 % deletes
over 250,000 keys) are appended to a file log, then each sink runs as a connector
(``ConnectorRunner``: read the log, decode, batch, versioned writes, commit) until its
group has committed the whole topic. The references write the same events, already in
memory, with no version check: ``opensearch-py``'s ``helpers.bulk`` (same bulk size, an
index with the sink's settings and mapping) and pipelined redis-py ``SET``/``DEL`` (with
``hiredis``, as the sink); on a 3-master Redis Cluster, the same through a
``RedisCluster`` pipeline. ``--only redis`` (or ``opensearch``, ``redis-cluster``) runs
one of them. Each
ratio is reference time / sink time (1.0: as fast); OpenSearch's sides run twice, in the
order sink, reference, reference, sink, their times summed (``bench_opensearch``).
Prints ``name=value`` lines, the headline last.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import redis
from opensearchpy import OpenSearch, helpers
from redis.cluster import RedisCluster

from cdc.config import ConnectorConfig
from cdc.log import Position, Record
from cdc.log.file import FileLog
from cdc.memory import keep_freed_memory
from compose.launcher import OpenSearchServer, RedisServer
from compose.launcher.redis_cluster import RedisClusterServer
from connectors.runtime import ConnectorRunner, RunnerOptions

SCALE = float(os.environ.get("BENCH_SCALE", "1"))
EVENTS = max(1_000, int(500_000 * SCALE))
KEYS = max(500, EVENTS // 2)
BATCH = 500
PREFIX = "bench"
TOPIC = f"{PREFIX}.public.orders"

Event = tuple[int, dict[str, Any] | None]  # (id, row or None for a delete)


def make_events() -> list[Event]:
    """The workload: upserts of small order rows and deletes, random keys."""
    rng = random.Random(5)
    events: list[Event] = []
    for number in range(EVENTS):
        key = rng.randrange(KEYS)
        if rng.random() < 0.2:
            events.append((key, None))
        else:
            events.append((key, {"id": key, "customer_id": key % 1000, "status": "paid",
                                 "amount": f"{number % 10_000 / 100:.2f}",
                                 "note": f"order {number}",
                                 "created_at": "2026-11-21T10:00:00.123456Z"}))
    return events


def fill_log(log: FileLog, events: list[Event]) -> None:
    """Append ``events`` as the capture would: one event per transaction, increasing LSNs."""
    producer = log.producer()
    records: list[Record] = []
    for number, (key, row) in enumerate(events):
        lsn = 0x1000000 + number * 64
        source = {"db": "bench", "schema": "public", "table": "orders",
                  "lsn": f"0/{lsn:X}", "commit_lsn": f"0/{lsn:X}", "seq": 0, "txid": number,
                  "commit_ts": "2026-11-21T10:00:00Z", "snapshot": False}
        value: dict[str, Any] = {"op": "d" if row is None else "u", "key": {"id": key},
                                 "before": None, "after": row, "unchanged": [],
                                 "source": source, "schema_version": 1}
        records.append(Record(TOPIC, orjson.dumps({"id": key}), orjson.dumps(value),
                              Position(lsn, 0), tombstone=row is None))
        if len(records) == 10_000:
            producer.append(records)
            records.clear()
    producer.append(records)
    producer.close()


def run_connector(log: FileLog, sink: str, settings: dict[str, Any], *,
                  name: str | None = None) -> float:
    """Seconds a connector (its own group: ``name``) takes to write and commit the whole
    topic."""
    connector = ConnectorConfig.model_validate({
        "name": name or f"bench-{sink}", "type": sink, "topics": [TOPIC], "batch_size": BATCH,
        "batch_timeout": "50ms", "config": settings})
    runner = ConnectorRunner(connector, log, topic_prefix=PREFIX,
                             options=RunnerOptions(lag_refresh_s=3600))
    admin = log.admin()
    end = {p.partition: p.end_offset for p in admin.partitions(TOPIC)}
    started = time.perf_counter()
    runner.start()
    try:
        while True:
            committed = {lag.partition: lag.committed for lag in admin.group_lag(runner.group)
                         if lag.topic == TOPIC}
            if all(committed.get(p) == offset for p, offset in end.items()):
                break
            if runner.stopping:
                runner.raise_failure()
            time.sleep(0.2)  # reading the group's offsets takes the GIL from the connector
        return time.perf_counter() - started
    finally:
        runner.stop()
        runner.join()


def bulk_actions(events: list[Event], index: str) -> Iterator[dict[str, Any]]:
    for key, row in events:
        if row is None:
            yield {"_op_type": "delete", "_index": index, "_id": str(key)}
        else:
            yield {"_op_type": "index", "_index": index, "_id": str(key), "_source": row}


def versioned_actions(events: list[Event], index: str) -> Iterator[dict[str, Any]]:
    """The kind of bulk actions the sink sends: external_gte versions on every action."""
    for version, (key, row) in enumerate(events, start=1):
        action: dict[str, Any] = {"_index": index, "_id": str(key), "version": version,
                                  "version_type": "external_gte"}
        if row is None:
            action["_op_type"] = "delete"
        else:
            action.update(_op_type="index", _source=row)
        yield action


def warm_up(client: OpenSearch, events: list[Event], count: int = 20_000) -> None:
    """Index the first ``count`` events into throwaway indices first, both plain and
    versioned (the sink's kind of request), so neither measured run pays the JVM's JIT
    compilation of its request path (measured: 1.4-3 s of compiler CPU for whichever ran
    first)."""
    for index, actions in (("warmup", bulk_actions), ("warmup-versioned", versioned_actions)):
        helpers.bulk(client, actions(events[:count], index), chunk_size=BATCH,
                     raise_on_error=False)
        client.indices.delete(index=index)


def index_body(client: OpenSearch, like: str) -> dict[str, Any]:
    """Settings and mapping for an index made like ``like``'s (an alias or an index)."""
    concrete = next(iter(client.indices.get(index=like)))
    settings = client.indices.get_settings(index=concrete)[concrete]["settings"]["index"]
    mapping = client.indices.get_mapping(index=concrete)[concrete]["mappings"]
    kept = {name: settings[name] for name in ("number_of_shards", "number_of_replicas",
                                              "refresh_interval", "gc_deletes")
            if name in settings}
    return {"settings": kept, "mappings": mapping}


def opensearch_reference(client: OpenSearch, events: list[Event], index: str,
                         body: dict[str, Any]) -> float:
    """Seconds ``helpers.bulk`` takes on the same events, into a new ``index`` made with
    ``body`` (``index_body``: the sink's settings and mapping)."""
    client.indices.create(index=index, body=body)
    started = time.perf_counter()
    helpers.bulk(client, bulk_actions(events, index), chunk_size=BATCH,
                 raise_on_error=False)
    return time.perf_counter() - started


def redis_reference(client: redis.Redis | RedisCluster, events: list[Event]) -> float:
    """Seconds a pipelined SET/DEL loop takes on the same events."""
    started = time.perf_counter()
    for start in range(0, len(events), BATCH):
        pipe = client.pipeline(transaction=False)
        for key, row in events[start:start + BATCH]:
            if row is None:
                pipe.delete(f"reference:{key}")
            else:
                pipe.set(f"reference:{key}", orjson.dumps(row))
        pipe.execute()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    """Fill a log, run the sinks and their references (``--only`` one of them); print the
    figures."""
    keep_freed_memory()  # as the cdc connect process does (cdc.memory)
    parser = argparse.ArgumentParser(prog="python -m bench.sinks", description=__doc__)
    parser.add_argument("--only", choices=("opensearch", "redis", "redis-cluster"),
                        help="run only this sink and its reference")
    only = parser.parse_args(argv).only
    workdir = Path(tempfile.mkdtemp(prefix="bench-sinks-"))
    events = make_events()
    log = FileLog(workdir / "log")
    try:
        fill_log(log, events)
        # the references' events stay in memory all along: keep the collector from
        # walking them again and again while the sinks run (a process running a
        # connector holds no such heap)
        gc.freeze()
        if only in (None, "opensearch"):
            bench_opensearch(log, events)
        if only in (None, "redis"):
            bench_redis(log, events)
        if only in (None, "redis-cluster"):
            bench_redis_cluster(log, events)
    finally:
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)


def bench_opensearch(log: FileLog, events: list[Event]) -> None:
    """The OpenSearch sink against ``helpers.bulk``, in the order sink, reference,
    reference, sink (each into a new index, the connector in a new group each time), the
    times summed: each side runs once first and once last, so neither gets more of the
    JVM's warm-up (its JIT compiles Lucene's indexing and merge code for seconds, well
    past ``warm_up``) or of a drift of the machine."""
    with OpenSearchServer() as search_server:
        client = OpenSearch([search_server.url], timeout=120)
        warm_up(client, events)

        def sink(turn: int) -> float:
            return run_connector(log, "opensearch", {"hosts": [search_server.url],
                                                     "index": f"orders{turn}",
                                                     "bulk_size": BATCH},
                                 name=f"bench-opensearch-{turn}")

        sink_s = sink(0)
        body = index_body(client, "orders0")
        reference_s = opensearch_reference(client, events, "reference0", body)
        client.indices.delete(index="orders0*,reference0")
        reference_s += opensearch_reference(client, events, "reference1", body)
        sink_s += sink(1)
        client.close()
    print(f"opensearch_sink_events_per_s={2 * EVENTS / sink_s:.0f}")
    print(f"opensearch_bulk_helper_events_per_s={2 * EVENTS / reference_s:.0f}")
    print(f"opensearch_sink_ratio_vs_bulk_helper={reference_s / sink_s:.2f}")


def bench_redis(log: FileLog, events: list[Event]) -> None:
    """The Redis sink against pipelined ``SET``/``DEL``."""
    with RedisServer() as redis_server:
        cache = redis.Redis.from_url(redis_server.url)
        reference_s = redis_reference(cache, events)
        sink_s = run_connector(log, "redis", {"url": redis_server.url,
                                              "key_template": "orders:{key}"})
        cache.close()
    print(f"events={EVENTS}")
    print(f"redis_sink_events_per_s={EVENTS / sink_s:.0f}")
    print(f"redis_pipeline_events_per_s={EVENTS / reference_s:.0f}")
    print(f"redis_sink_ratio_vs_pipeline={reference_s / sink_s:.2f}")


def bench_redis_cluster(log: FileLog, events: list[Event]) -> None:
    """The Redis sink on a 3-master Redis Cluster (``urls``) against a ``RedisCluster``
    pipeline of ``SET``/``DEL`` on the same keys."""
    with RedisClusterServer() as cluster:
        client = RedisCluster.from_url(cluster.urls[0])
        reference_s = redis_reference(client, events)
        client.close()
        sink_s = run_connector(log, "redis", {"urls": cluster.urls,
                                              "key_template": "orders:{key}"},
                               name="bench-redis-cluster")
    print(f"redis_cluster_sink_events_per_s={EVENTS / sink_s:.0f}")
    print(f"redis_cluster_pipeline_events_per_s={EVENTS / reference_s:.0f}")
    print(f"redis_cluster_sink_ratio_vs_pipeline={reference_s / sink_s:.2f}")


if __name__ == "__main__":
    main()
