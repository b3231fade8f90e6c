"""``cdc replay`` on a Spark standalone cluster (a master and two one-core workers from
the installed PySpark, ``SparkStandaloneCluster``): ``materialize`` gives the rows and
checksum of ``local[2]`` over the same file log, also when a worker is SIGKILLed while
the job runs; ``rebuild-cache`` run twice (on the cluster, then in process) leaves the
same keys, values and versions; ``materialize``, ``state-as-of``, ``aggregates`` and both
rebuilds over the same events in Kafka give what ``local[2]`` gives over the file log.
On the cluster over Kafka run
``materialize`` and ``rebuild-search`` (the executors reading Kafka, writing a sink); the
other jobs read Kafka through the same source in the shared ``local[2]`` session (a job
on the cluster starts three JVMs: most of its time in this suite).

Each job on the cluster is ``python -m cdc.cli replay …`` in its own process (its own
driver JVM), as an operator runs it; the ``local[2]`` references run in process, in the
tests' shared ``local[2]`` session (a JVM's start is most of a small job). The
executors' Python cannot import Distributary by itself (a wrapper drops the editable
install and checks that ``cdc`` is not importable): the tasks run from the zip the
session ships. The log is written directly in the file log's format
(``bench.spark.write_log``); no PostgreSQL is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
import redis
from opensearchpy import OpenSearch

from bench.spark import EVENTS_PER_TRANSACTION, PREFIX, TABLE, TOPIC, write_log
from cdc.capture.lsn import format_lsn
from cdc.log import Record
from cdc.log.file import FileLog
from cdc.log.kafka import KafkaLog
from compose.launcher.base import free_port
from compose.launcher.spark_standalone import SparkStandaloneCluster
from tests.integration.spark.test_replay_materialize import replay as replay_in_process

pytestmark = pytest.mark.integration

EVENTS, KEYS = 30_000, 6_000
AS_OF_LSN = 0x1000000 + 4096 * (EVENTS // EVENTS_PER_TRANSACTION // 2)  # mid-log
AGGREGATES = [("per_status", "SELECT status, count(*) AS orders, sum(amount) AS total "
                             "FROM `public.orders` GROUP BY status")]  # bench.spark.TABLE
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
ROOT = Path(__file__).resolve().parents[3]
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# The executors' Python: this interpreter without the editable install of Distributary.
_NO_EDITABLE = """\
import importlib.util, runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in
                    (getattr(f, "__module__", "") or "").lower()]
sys.path_hooks[:] = [h for h in sys.path_hooks if "editable" not in
                     (getattr(h, "__module__", "") or "").lower()]
sys.path_importer_cache.clear()
sys.path[:] = [p for p in sys.path if p and p != {root!r}]
if importlib.util.find_spec("cdc") is not None:
    sys.exit("the executor's Python can import cdc by itself")
assert sys.argv[1] == "-m", sys.argv
module = sys.argv[2]
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[SparkStandaloneCluster]:
    """One cluster for the file; each test finds both workers running."""
    with SparkStandaloneCluster(workers=2) as running:
        yield running


@pytest.fixture
def healthy(cluster: SparkStandaloneCluster) -> SparkStandaloneCluster:
    for number in range(len(cluster.worker_ports)):
        if number not in cluster.running_workers():
            cluster.start_worker(number)
    return cluster


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The log, and the executors' Python wrapper."""
    root = tmp_path_factory.mktemp("standalone")
    write_log(root / "log", EVENTS, KEYS)
    script = root / "no_editable.py"
    script.write_text(_NO_EDITABLE.format(root=str(ROOT)))
    python = root / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    python.chmod(0o755)
    return root


@dataclass
class Job:
    """A ``cdc replay`` run: its pipeline file, and what its output said."""

    config: Path
    ui_port: int
    datasets: dict[str, tuple[int, str]] = field(default_factory=dict)


def pipeline(workdir: Path, name: str, redis_url: str | None = None, *,
             kafka: str | None = None, opensearch_url: str | None = None) -> Job:
    """A pipeline file over the file log (or the same events in ``kafka``), with a Redis
    connector (keys under ``name``) and an OpenSearch one (index ``<name>_orders``)."""
    ui_port = free_port()
    log = (f"log:\n  backend: kafka\n  bootstrap_servers: [{kafka}]\n" if kafka
           else f"log:\n  backend: file\n  path: {workdir / 'log'}\n")
    text = (f"source:\n  dsn: postgresql://127.0.0.1:1/none\n  slot: {PREFIX}\n"
            f"  publication: {PREFIX}\n" + log +
            f"spark:\n  output_path: {workdir / name}\n"
            "  conf:\n    spark.sql.shuffle.partitions: 2\n"
            f"    spark.ui.port: {ui_port}\n    spark.port.maxRetries: 0\n"
            f"    spark.local.dir: {workdir / 'spark-tmp'}\n"
            # small data: JVM start-up is most of the work, the quick JIT halves it
            f"    spark.driver.extraJavaOptions: {QUICK_JVM}\n"
            f"    spark.executor.extraJavaOptions: {QUICK_JVM}\n")
    text += "  aggregates:\n" + "".join(
        f"    - name: {aggregate}\n      sql: \"{sql}\"\n" for aggregate, sql in AGGREGATES)
    if redis_url or opensearch_url:
        text += "connectors:\n"
    if redis_url:
        text += (f"  - name: cache\n    type: redis\n    topics: [{PREFIX}.{TABLE}]\n"
                 f"    config:\n      url: {redis_url}\n"
                 f"      key_template: \"{name}:{{table}}:{{key}}\"\n")
    if opensearch_url:
        text += (f"  - name: search\n    type: opensearch\n    topics: [{PREFIX}.{TABLE}]\n"
                 f"    config:\n      hosts: [{opensearch_url}]\n"
                 f"      index: \"{name}_{{table}}\"\n")
    config = workdir / f"{name}.yaml"
    config.write_text(text)
    return Job(config, ui_port)


def start(job: Job, command: str, master: str, workdir: Path,
          *options: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env.pop("PYSPARK_PYTHON", None)
    if master.startswith("spark://"):
        env["PYSPARK_PYTHON"] = str(workdir / "python")
    return subprocess.Popen(
        [sys.executable, "-m", "cdc.cli", "replay", command, "-c", str(job.config),
         "--master", master, "--tables", TABLE, "--no-progress", *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=workdir)


def finish(job: Job, proc: subprocess.Popen[str]) -> dict[str, tuple[int, str]]:
    """Wait for the run; the dataset → (rows, checksum) lines of its output."""
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, (out, err[-4000:])
    for line in out.splitlines():
        if ": rows=" in line:
            name, rest = line.split(": rows=", 1)
            rows, checksum = rest.split(" checksum=")
            job.datasets[name] = (int(rows), checksum.split()[0])
    return job.datasets


def replay(job: Job, command: str, master: str, workdir: Path,
           *options: str) -> dict[str, tuple[int, str]]:
    return finish(job, start(job, command, master, workdir, *options))


def local(job: Job, command: str, *options: str) -> dict[str, tuple[int, str]]:
    """The run on ``local[2]``: in process, in the tests' shared session (``spark``)."""
    return replay_in_process(command, "-c", str(job.config), "--tables", TABLE, *options)


def _get(url: str) -> Any:
    with _DIRECT.open(url, timeout=2) as response:
        return json.load(response)


def kill_mid_job(cluster: SparkStandaloneCluster, job: Job, proc: subprocess.Popen[str],
                 worker: int) -> threading.Thread:
    """A thread that SIGKILLs ``worker`` once the run's first job has ended and a stage of
    a later one has tasks running; ``killed`` on it says when."""
    api = f"http://127.0.0.1:{job.ui_port}/api/v1/applications"

    def busy() -> bool:
        try:
            [app] = _get(api)
            done = _get(f"{api}/{app['id']}/jobs?status=succeeded")
            stages = _get(f"{api}/{app['id']}/stages?status=active")
        except (OSError, ValueError):
            return False
        return bool(done) and any(stage["numActiveTasks"] > 0 for stage in stages)

    def run() -> None:
        while proc.poll() is None:
            if busy():
                cluster.kill_worker(worker)
                setattr(thread, "killed", time.monotonic())  # noqa: B010
                return
            time.sleep(0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_materialize_equals_local_and_survives_a_killed_worker(
        healthy: SparkStandaloneCluster, workdir: Path, spark: Any) -> None:
    rows, checksum = local(pipeline(workdir, "local"), "materialize")[TABLE]
    assert rows > KEYS // 2

    job = pipeline(workdir, "standalone")
    proc = start(job, "materialize", healthy.master_url, workdir)
    killer = kill_mid_job(healthy, job, proc, worker=1)
    standalone = finish(job, proc)
    killer.join(timeout=10)
    assert getattr(killer, "killed", None) is not None, "the job ended before the kill"
    assert healthy.running_workers() == [0]
    assert standalone[TABLE] == (rows, checksum)


def redis_state(client: redis.Redis, name: str) -> dict[bytes, bytes | None]:
    keys = sorted(key for key in client.scan_iter(match=f"*{name}:*", count=5000)
                  if not key.startswith(b"_cdc_truncated:"))
    return {key: cast(bytes | None, client.get(key)) for key in keys}


def test_rebuild_cache_twice_is_idempotent(healthy: SparkStandaloneCluster, workdir: Path,
                                           redis_url: str, unique_name: str,
                                           spark: Any) -> None:
    """rebuild-cache on the cluster, then again over the same Redis (in process: the
    writes are the same connector's), leaves the same keys, values and versions."""
    client = redis.Redis.from_url(redis_url)
    job = pipeline(workdir, unique_name, redis_url)
    try:
        first = replay(job, "rebuild-cache", healthy.master_url, workdir)[TABLE]
        state = redis_state(client, unique_name)
        values = {k for k in state if not k.startswith(b"_cdc_")}
        versions = {k for k in state if k.startswith(b"_cdc_version:")}
        assert first[0] == len(values) > KEYS // 2
        assert len(versions) >= len(values)

        second = local(job, "rebuild-cache")[TABLE]
        assert second == first
        assert redis_state(client, unique_name) == state
    finally:
        for key in client.scan_iter(match=f"*{unique_name}:*", count=5000):
            client.delete(key)
        client.close()


@pytest.fixture(scope="module")
def kafka_log(workdir: Path, kafka_bootstrap: str) -> str:
    """The file log's events, also in Kafka (``kafka_bootstrap``)."""
    copy_to_kafka(workdir / "log", kafka_bootstrap)
    return kafka_bootstrap


def copy_to_kafka(root: Path, bootstrap: str) -> None:
    """The file log's topics, record for record (partition, key, value, position), into
    new topics of the same names on ``bootstrap``."""
    source, target = FileLog(root), KafkaLog([bootstrap])
    try:
        producer = target.producer()
        for topic in (TOPIC, f"{PREFIX}._schemas"):
            target.admin().create_topic(topic, len(source.admin().partitions(topic)))
            producer.append([Record(m.topic, m.key, m.value, m.position, m.tombstone,
                                    partition=m.partition) for m in source.read_to_end(topic)])
        producer.close()
    finally:
        source.close()
        target.close()


def test_every_job_over_the_kafka_log_equals_local_over_the_file_log(
        healthy: SparkStandaloneCluster, workdir: Path, kafka_log: str, spark: Any) -> None:
    """materialize on the cluster reading Kafka (Spark's Kafka source jars reach the
    executors by ``spark.jars``), state-as-of and aggregates reading Kafka in process,
    give the rows and checksums of ``local[2]`` reading the same events from the file
    log."""
    kafka_bootstrap = kafka_log
    for command, options, on_cluster in (
            ("materialize", (), True), ("aggregates", (), False),
            ("state-as-of", ("--as-of", format_lsn(AS_OF_LSN)), False)):
        on_file = local(pipeline(workdir, f"local-{command}"), command, *options)
        over_kafka = pipeline(workdir, f"kafka-{command}", kafka=kafka_bootstrap)
        on_kafka = (replay(over_kafka, command, healthy.master_url, workdir, *options)
                    if on_cluster else local(over_kafka, command, *options))
        assert on_file and on_kafka == on_file, command
        assert all(rows > 0 for rows, _ in on_file.values()), (command, on_file)


def search_state(client: OpenSearch, name: str) -> dict[str, tuple[Any, int]]:
    """Each document of ``<name>_orders``: its source and version."""
    client.indices.refresh(index=f"{name}_orders")
    found = client.search(index=f"{name}_orders", size=10_000, version=True,
                          body={"query": {"match_all": {}}})
    return {hit["_id"]: (hit["_source"], hit["_version"]) for hit in found["hits"]["hits"]}


def test_both_rebuilds_over_the_kafka_log_equal_local_over_the_file_log(
        healthy: SparkStandaloneCluster, workdir: Path, kafka_log: str, redis_url: str,
        opensearch_url: str, unique_name: str, spark: Any) -> None:
    """rebuild-search on the cluster reading Kafka, rebuild-cache reading Kafka in process
    (on the cluster: ``test_rebuild_cache_twice_is_idempotent``), write the keys, values,
    documents and versions ``local[2]`` writes from the file log."""
    cache = redis.Redis.from_url(redis_url)
    search = OpenSearch([opensearch_url])
    on_file, on_kafka = f"{unique_name}_local", f"{unique_name}_kafka"
    try:
        for command in ("rebuild-cache", "rebuild-search"):
            local(pipeline(workdir, on_file, redis_url, opensearch_url=opensearch_url),
                  command)
            over_kafka = pipeline(workdir, on_kafka, redis_url, kafka=kafka_log,
                                  opensearch_url=opensearch_url)
            if command == "rebuild-search":
                replay(over_kafka, command, healthy.master_url, workdir)
            else:
                local(over_kafka, command)
        keys = redis_state(cache, on_file)
        assert len(keys) > KEYS // 2
        assert {key.replace(on_file.encode(), on_kafka.encode()): value
                for key, value in keys.items()} == redis_state(cache, on_kafka)
        documents = search_state(search, on_file)
        assert len(documents) > KEYS // 2
        assert search_state(search, on_kafka) == documents
    finally:
        for name in (on_file, on_kafka):
            for key in cache.scan_iter(match=f"*{name}:*", count=5000):
                cache.delete(key)
            search.indices.delete(index=f"{name}_orders*", ignore_unavailable=True)
        cache.close()
        search.close()
