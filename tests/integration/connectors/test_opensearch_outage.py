"""OpenSearch stopped for 15 s under load behind a real ``cdc run``: nothing is lost.

A node of the test's own is stopped (SIGTERM) while about 50 transactions a second
insert, update and delete rows of ``accounts``, then started again on the same port over
the same data. During the outage ``/metrics`` shows the capture going on (events logged
and acknowledged), the connector retrying with backoff (a few retries a second, not a
busy loop) and its lag growing; nothing is dead-lettered and the connector stays up.
Afterwards the lag is back to 0, the index equals the table, every document carries the
version of its row's last event in the log, and no document's version ever went back.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from opensearchpy import OpenSearch

from cdc.log import StartAt
from cdc.log.file import FileLog
from compose.launcher import OpenSearchServer, free_port
from connectors.runtime.events import decode_event
from tests.processes import start_cdc_run, stop_process

from ..observability.pipeline_process import TOKEN, Pipeline, wait_until_ready
from .harness import wait_until
from .outage_metrics import OutageWatch, sample_sum

pytestmark = pytest.mark.integration

OUTAGE_S = 15.0
ROWS = 300
CONNECTOR = "search"

Documents = dict[int, tuple[int, int]]  # id → (_version, v)


@pytest.fixture
def own_opensearch() -> Iterator[OpenSearchServer]:
    """An OpenSearch this test may stop and start again on the same port and data."""
    with OpenSearchServer(heap="512m") as server:
        yield server


@contextmanager
def cdc_run(dsn: str, name: str, opensearch_url: str, workdir: Path) -> Iterator[Pipeline]:
    """``cdc run`` feeding ``accounts`` to OpenSearch, with ``/metrics`` on a free port."""
    port = free_port()
    (workdir / "token").write_text(TOKEN + "\n")
    config = workdir / "pipeline.yaml"
    config.write_text(f"""
source:
  dsn: {dsn}
  slot: {name}
  publication: {name}
  tables: [public.accounts]
  heartbeat_interval: 1s
log:
  backend: file
  path: {workdir / 'log'}
  partitions: 3
connectors:
  - name: {CONNECTOR}
    type: opensearch
    topics: [{name}.public.accounts]
    batch_timeout: 100ms
    retry: {{initial_backoff: 100ms, max_backoff: 2s}}
    config:
      hosts: [{opensearch_url}]
      index: "{name}_{{table}}"
      request_timeout: 5s
metrics:
  port: {port}
  token_file: {workdir / 'token'}
  sample_interval: 500ms
""")
    stderr = workdir / "stderr.log"
    process = start_cdc_run(config, stderr)
    try:
        yield Pipeline(process, port, name, dsn, stderr)
    finally:
        stop_process(process)


def steady_load(dsn: str, stop: threading.Event, failures: list[BaseException]) -> None:
    """About 50 transactions a second over ``ROWS`` ids: upserts bumping ``v``, some deletes."""
    number = 0
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not stop.is_set():
                number += 1
                key = number * 7919 % ROWS
                if number % 9 == 0:
                    conn.execute("DELETE FROM accounts WHERE id = %s", (key,))
                else:
                    conn.execute("INSERT INTO accounts VALUES (%s, 1) ON CONFLICT (id) "
                                 "DO UPDATE SET v = accounts.v + 1", (key,))
                time.sleep(0.02)
    except BaseException as exc:  # reported by the test
        failures.append(exc)


def documents(client: OpenSearch, alias: str) -> Documents:
    """id → (``_version``, ``v``) of every document behind ``alias`` (each id once)."""
    if not client.indices.exists(index=alias):
        return {}
    client.indices.refresh(index=alias)
    found = client.search(index=alias, body={"size": 10_000, "version": True,
                                             "query": {"match_all": {}}})
    hits = found["hits"]["hits"]
    by_id = {int(hit["_id"]): (int(hit["_version"]), int(hit["_source"]["v"])) for hit in hits}
    assert len(by_id) == len(hits), "one document per row, in one index behind the alias"
    return by_id


def table_rows(dsn: str) -> dict[int, int]:
    with psycopg.connect(dsn) as conn:
        return dict(conn.execute("SELECT id, v FROM accounts").fetchall())


def last_events(log_dir: Path, topic: str) -> dict[int, tuple[int, str]]:
    """id → (version, op) of each row's last event in the log (read once ``cdc run`` ended)."""
    event_log = FileLog(log_dir)
    consumer = event_log.consumer("outage-check", topics=[topic], start=StartAt.earliest())
    last: dict[int, tuple[int, str]] = {}
    try:
        while batch := consumer.poll(10_000, timeout=0.3):
            for message in batch:
                event = decode_event(message)
                key = int(event.key["id"])
                assert event.version > last.get(key, (0, ""))[0], "versions rise per key"
                last[key] = (event.version, event.op)
    finally:
        consumer.close()
        event_log.close()
    return last


def test_opensearch_outage_under_load_loses_nothing(fresh_database: str, unique_name: str,
                                                    own_opensearch: OpenSearchServer,
                                                    tmp_path: Path) -> None:
    dsn, alias, topic = fresh_database, f"{unique_name}_accounts", f"{unique_name}.public.accounts"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE accounts (id int PRIMARY KEY, v int NOT NULL)")
    client = OpenSearch(hosts=[own_opensearch.url], timeout=10, max_retries=0)
    stop_load = threading.Event()
    failures: list[BaseException] = []
    load = threading.Thread(target=steady_load, args=(dsn, stop_load, failures), daemon=True)
    seen: list[Documents] = []
    try:
        with cdc_run(dsn, unique_name, own_opensearch.url, tmp_path) as pipeline:
            wait_until_ready(pipeline)
            load.start()
            try:
                wait_until(lambda: len(documents(client, alias)) > 20, timeout=30,
                           what="the first documents are indexed")
                seen.append(documents(client, alias))
                watch = OutageWatch(pipeline, CONNECTOR, topic)
                own_opensearch.stop_process()
                watch.during(OUTAGE_S)
                written = sample_sum(pipeline, "distributary_connector_events_written_total",
                                     connector=CONNECTOR)
                own_opensearch.start_again()
                seen.append(documents(client, alias))
                wait_until(lambda: sample_sum(
                    pipeline, "distributary_connector_events_written_total",
                    connector=CONNECTOR) > written, timeout=60,
                    what="the connector writes to OpenSearch again while the load goes on")
            finally:
                stop_load.set()
                load.join(timeout=10)
            assert not failures, failures
            watch.check(min_lag=100, max_retries_per_s=5.0)
            wait_until(lambda: {key: v for key, (_, v) in documents(client, alias).items()}
                       == table_rows(dsn), timeout=60,
                       what="the index equals the table after the outage")
            wait_until(lambda: sample_sum(pipeline, "distributary_connector_lag",
                                          connector=CONNECTOR, topic=topic) == 0,
                       timeout=30, what="the connector's lag is back to 0 on /metrics")
            seen.append(documents(client, alias))
            assert sample_sum(pipeline, "distributary_connector_dead_letters_total",
                              connector=CONNECTOR) == 0
            assert pipeline.process.poll() is None, pipeline.stderr.read_text()[-3000:]
    finally:
        client.close()
    last = last_events(tmp_path / "log", topic)
    assert {key: version for key, (version, _) in seen[-1].items()} == {
        key: version for key, (version, op) in last.items() if op != "d"}
    for earlier, later in itertools.pairwise(seen):
        went_back = {key: (version, later[key][0]) for key, (version, _) in earlier.items()
                     if key in later and later[key][0] < version}
        assert not went_back, f"document versions went back: {went_back}"
