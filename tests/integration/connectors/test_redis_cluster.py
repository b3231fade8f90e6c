"""``cdc run`` into a real Redis Cluster (three masters, a replica each): the snapshot,
then inserts, updates, deletes and a truncate over keys in many slots on every master,
as JSON and as hashes; and a master SIGKILLed under load, its replica promoted. Each time
``cdc reconcile`` is clean and nothing is dead-lettered. And a slot moved under a sink."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
from redis.cluster import RedisCluster
from redis.crc import key_slot

from connectors.contract import SinkUnavailableError
from connectors.redis import RedisSinkConfig
from connectors.redis.sink import RedisSink
from tests.processes import start_cdc_run, stop_process
from tests.unit.connectors.sink_events import TableEvents

from .conftest import MakeHarness
from .harness import PipelineHarness

ROWS = 300
SUMMARY = re.compile(r"reconcile: tables=(\d+) rows=(\d+) missing=(\d+) extra=(\d+) "
                     r"different=(\d+)")
SCHEMA = """
CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL, n int NOT NULL);
CREATE TABLE gone (id int PRIMARY KEY, v text);
INSERT INTO items SELECT g, 'v' || g, g FROM generate_series(1, 300) g;  -- ROWS
INSERT INTO gone SELECT g, 'g' || g FROM generate_series(1, 50) g;
"""


def connectors_yaml(name: str, urls: list[str]) -> str:
    topics = f"[{name}.public.items, {name}.public.gone]"
    return "".join(f"""
  - name: {kind}
    type: redis
    topics: {topics}
    batch_timeout: 50ms
    retry: {{initial_backoff: 100ms, max_backoff: 1s}}
    config:
      urls: [{", ".join(urls)}]
      key_template: "{name}:{kind}:{{table}}:{{key}}"
      value_format: {kind}
      timeout: 2s
""" for kind in ("json", "hash"))


@pytest.fixture
def cluster_client(redis_cluster: Any, unique_name: str) -> Iterator[RedisCluster]:
    client = RedisCluster.from_url(redis_cluster.urls[0])
    yield client
    doomed = list(client.scan_iter(match=f"*{unique_name}:*", count=1000))
    if doomed:
        client.unlink(*doomed)
    client.close()


@pytest.fixture
def pipeline(make_harness: MakeHarness, redis_cluster: Any,
             unique_name: str) -> PipelineHarness:
    return make_harness(SCHEMA, connectors_yaml(unique_name, redis_cluster.urls))


def reconcile(config: Path) -> tuple[int, ...]:
    """``cdc reconcile``'s summary (it waits until the connectors consumed everything)."""
    done = subprocess.run([sys.executable, "-m", "cdc.cli", "reconcile", "-c", str(config),
                           "--timeout", "60"], capture_output=True, text=True, timeout=180)
    match = SUMMARY.search(done.stdout)
    assert match is not None, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return tuple(int(group) for group in match.groups())


def wait_for(check: Callable[[], bool], what: str, process: subprocess.Popen[bytes],
             stderr: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert process.poll() is None, stderr.read_text()[-3000:]
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def keys_of(client: RedisCluster, pattern: str) -> list[bytes]:
    return list(client.scan_iter(match=pattern, count=1000))


def changes(harness: PipelineHarness, round_: int) -> None:
    """One round of streamed changes over ``items``: inserts, updates, deletes."""
    base = ROWS + 100 * round_
    with harness.connect() as conn:
        conn.execute("INSERT INTO items SELECT g, 'new' || g, g "
                     "FROM generate_series(%s::int, %s::int) g", (base + 1, base + 40))
        conn.execute("UPDATE items SET v = v || '+', n = n + 1 WHERE id %% 7 = %s",
                     (round_ % 7,))
        conn.execute("DELETE FROM items WHERE id %% 23 = %s", (round_ % 23,))


def dead_letters(harness: PipelineHarness, name: str) -> int:
    return sum(harness.end_offsets(f"{name}.dlq.{kind}") for kind in ("json", "hash"))


def test_cdc_run_into_a_redis_cluster_reconciles_clean(
        pipeline: PipelineHarness, cluster_client: RedisCluster, unique_name: str,
        tmp_path: Path) -> None:
    stderr = tmp_path / "run.log"
    process = start_cdc_run(pipeline.config_path, stderr)
    try:
        wait_for(lambda: len(keys_of(cluster_client, f"{unique_name}:hash:items:*")) == ROWS,
                 "the snapshot reaches the cluster", process, stderr)
        for round_ in range(3):
            changes(pipeline, round_)
        pipeline.execute("TRUNCATE gone", "INSERT INTO gone VALUES (1000, 'after')")
        tables, rows, *differences = reconcile(pipeline.config_path)
        assert (tables, differences) == (2, [0, 0, 0])
        assert rows > ROWS
        assert {key.rsplit(b":", 1)[1] for key in
                keys_of(cluster_client, f"{unique_name}:json:gone:*")} == {b"1000"}
        holders = {cluster_client.get_node_from_key(key).name  # type: ignore[no-untyped-call]
                   for key in keys_of(cluster_client, f"{unique_name}:json:items:*")}
        assert len(holders) == 3, "keys on every master"
    finally:
        stop_process(process)
    assert dead_letters(pipeline, unique_name) == 0


def test_a_master_killed_under_load_loses_nothing(
        pipeline: PipelineHarness, cluster_client: RedisCluster, redis_cluster: Any,
        unique_name: str, tmp_path: Path) -> None:
    stderr = tmp_path / "run.log"
    process = start_cdc_run(pipeline.config_path, stderr)
    victim, killed = redis_cluster.masters()[0], False
    try:
        wait_for(lambda: len(keys_of(cluster_client, f"{unique_name}:json:items:*")) == ROWS,
                 "the snapshot reaches the cluster", process, stderr)
        changes(pipeline, 0)
        redis_cluster.kill(victim)
        killed = True
        for round_ in range(1, 6):  # while the cluster notices and fails over
            changes(pipeline, round_)
        redis_cluster.wait_failed_over()
        assert victim not in redis_cluster.masters()
        changes(pipeline, 6)
        tables, _, *differences = reconcile(pipeline.config_path)
        assert (tables, differences) == (2, [0, 0, 0])
        assert process.poll() is None, stderr.read_text()[-3000:]
    finally:
        stop_process(process)
        if killed:  # back as a replica, for the tests after this one
            redis_cluster.start_node(victim)
            redis_cluster.wait_failed_over()
    assert dead_letters(pipeline, unique_name) == 0


def stored(client: RedisCluster, key: str) -> Any:
    return orjson.loads(cast(bytes, client.get(key)))


def test_a_write_after_its_slot_moved_is_retried_by_the_new_slot_map(
        redis_cluster: Any, cluster_client: RedisCluster, unique_name: str) -> None:
    """A resharding moves a slot under a sink whose slot map is old: its next write is
    refused before writing (transient), and the retry writes every row where it now is."""
    config = RedisSinkConfig.model_validate({
        "urls": redis_cluster.urls, "key_template": f"{unique_name}:{{table}}:{{key}}"})
    sink = RedisSink(config)
    sink.open()
    items = TableEvents(table="items")
    key = f"{unique_name}:items:0"
    slot = key_slot(key.encode())
    holder = cluster_client.get_node_from_key(key).port  # type: ignore[no-untyped-call]
    try:
        assert sink.write([items.upsert({"id": n}, 100, n) for n in range(40)]).rejected == []
        redis_cluster.move_slot(slot, next(port for port in redis_cluster.masters()
                                           if port != holder))
        batch = [items.upsert({"id": n, "v": 2}, 200, n) for n in range(40)]
        with pytest.raises(SinkUnavailableError, match="no longer holds a slot"):
            sink.write(batch)
        assert sink.write(batch).rejected == []
        cluster_client.nodes_manager.initialize()
        assert stored(cluster_client, key) == {"id": 0, "v": 2}
        assert {stored(cluster_client, f"{unique_name}:items:{n}")["v"]
                for n in range(40)} == {2}
        stale = [items.upsert({"id": 0, "v": 1}, 150)]  # older: refused by its version
        assert sink.write(stale).rejected == []
        assert stored(cluster_client, key) == {"id": 0, "v": 2}
    finally:
        sink.close()
        redis_cluster.move_slot(slot, holder)
        cluster_client.nodes_manager.initialize()
