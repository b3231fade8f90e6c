"""``cdc run`` into a 2-node OpenSearch cluster (indices with one replica), the connector
naming both nodes; under load one node is SIGKILLed, writes go on through the other, the
node is started again over its data and recovers. Nothing is lost or dead-lettered and
``cdc reconcile`` is clean."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from opensearchpy import OpenSearch
from opensearchpy.exceptions import TransportError

from compose.launcher.opensearch_cluster import OpenSearchCluster
from tests.processes import start_cdc_run, stop_process

from .conftest import MakeHarness
from .harness import PipelineHarness

pytestmark = pytest.mark.integration

ROWS = 300
MARKER = 1_000_000  # inserted while a node is down
CONNECTOR = "search"
SUMMARY = re.compile(r"reconcile: tables=(\d+) rows=(\d+) missing=(\d+) extra=(\d+) "
                     r"different=(\d+)")
SCHEMA = """
CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO items SELECT g, 0 FROM generate_series(1, 300) g;  -- ROWS
"""


@pytest.fixture
def cluster() -> Iterator[OpenSearchCluster]:
    """Two nodes of the test's own: one of them gets killed."""
    with OpenSearchCluster(nodes=2, heap="512m") as started:
        yield started


def connector_yaml(name: str, hosts: list[str]) -> str:
    return f"""
  - name: {CONNECTOR}
    type: opensearch
    topics: [{name}.public.items]
    batch_timeout: 50ms
    retry: {{initial_backoff: 100ms, max_backoff: 1s}}
    config:
      hosts: [{", ".join(hosts)}]
      index: "{name}_{{table}}"
      replicas: 1
      request_timeout: 5s
"""


def steady_load(dsn: str, stop: threading.Event, failures: list[BaseException]) -> None:
    """About 50 transactions a second over ``ROWS`` ids: updates bumping ``v``, deletes
    and inserts again."""
    number = 0
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not stop.is_set():
                number += 1
                key = number * 7919 % ROWS + 1
                if number % 9 == 0:
                    conn.execute("DELETE FROM items WHERE id = %s", (key,))
                else:
                    conn.execute("INSERT INTO items VALUES (%s, 1) ON CONFLICT (id) "
                                 "DO UPDATE SET v = items.v + 1", (key,))
                stop.wait(0.02)
    except BaseException as exc:  # reported by the test
        failures.append(exc)


def count(client: OpenSearch, alias: str, query: dict[str, object] | None = None) -> int:
    """Documents behind ``alias`` (0 while it does not exist or answers an error)."""
    try:
        client.indices.refresh(index=alias)
        found = client.count(index=alias, body={"query": query or {"match_all": {}}})
    except TransportError:
        return 0
    return int(found["count"])


def wait_for(check: Callable[[], bool], what: str, process: subprocess.Popen[bytes],
             stderr: Path, timeout: float = 60) -> None:
    """Poll ``check``; fail when ``cdc run`` exits or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert process.poll() is None, stderr.read_text()[-3000:]
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.2)


def reconcile(config: Path) -> tuple[int, ...]:
    """``cdc reconcile``'s summary (it waits until the connector consumed everything)."""
    done = subprocess.run([sys.executable, "-m", "cdc.cli", "reconcile", "-c", str(config),
                           "--timeout", "60"], capture_output=True, text=True, timeout=180)
    match = SUMMARY.search(done.stdout)
    assert match is not None, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return tuple(int(group) for group in match.groups())


def test_a_node_killed_under_load_loses_nothing(
        make_harness: MakeHarness, cluster: OpenSearchCluster, unique_name: str,
        tmp_path: Path) -> None:
    victim = cluster.followers()[0]  # the cluster manager stays: the cluster stays writable
    survivor = cluster.cluster_manager()
    hosts = [cluster.urls[victim], cluster.urls[survivor]]  # the victim first: failover
    harness: PipelineHarness = make_harness(SCHEMA, connector_yaml(unique_name, hosts))
    alias = f"{unique_name}_items"
    client = OpenSearch(hosts=[cluster.urls[survivor]], timeout=10, max_retries=0)
    stderr = tmp_path / "run.log"
    process = start_cdc_run(harness.config_path, stderr)
    stop_load = threading.Event()
    failures: list[BaseException] = []
    load = threading.Thread(target=steady_load, args=(harness.dsn, stop_load, failures),
                            daemon=True)
    try:
        wait_for(lambda: count(client, alias) == ROWS, "the snapshot is indexed", process,
                 stderr)
        settings = client.indices.get_settings(index=alias)
        assert {entry["settings"]["index"]["number_of_replicas"]
                for entry in settings.values()} == {"1"}
        cluster.wait_green()  # every shard has its replica on the other node
        load.start()
        cluster.stop_node(victim, signal.SIGKILL)
        harness.execute("INSERT INTO items VALUES (%s, 7)", params=(MARKER,))
        wait_for(lambda: count(client, alias, {"term": {"id": MARKER}}) == 1,
                 "a row written while a node is down is indexed", process, stderr)
        cluster.start_node(victim)
        cluster.wait_green()
        stop_load.set()
        load.join(timeout=10)
        assert not failures, failures
        tables, rows, *differences = reconcile(harness.config_path)
        assert (tables, differences) == (1, [0, 0, 0])
        assert rows > ROWS * 0.8
        assert process.poll() is None, stderr.read_text()[-3000:]
    finally:
        stop_load.set()
        load.join(timeout=10)
        stop_process(process)
        client.close()
    assert harness.end_offsets(f"{unique_name}.dlq.{CONNECTOR}") == 0, "nothing dead-lettered"
