"""Session-scoped real servers for integration tests, and unique names per test.

Each server comes from ``compose.launcher.services``: an environment variable naming an
existing server, testcontainers where a Docker engine answers, or the local launcher.
In CI (``CI=true``) a server that cannot start is an error; elsewhere the tests that need
it are skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg import sql

from compose.launcher import services

from .databases import drop_database

T = TypeVar("T")


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@contextlib.contextmanager
def _server(kind: str, provide: Callable[[], AbstractContextManager[T]]) -> Iterator[T]:
    try:
        handle = provide()
        value = handle.__enter__()
    except Exception as exc:
        if _in_ci():
            raise RuntimeError(f"{kind} could not be started in CI: {exc}") from exc
        pytest.skip(f"{kind} unavailable: {exc}")
    try:
        yield value
    finally:
        handle.__exit__(None, None, None)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """DSN of a PostgreSQL superuser on a server with ``wal_level=logical``."""
    with _server("PostgreSQL", services.postgres_dsn) as dsn:
        yield dsn


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of a Redis server."""
    with _server("Redis", services.redis_url) as url:
        yield url


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[Any]:
    """A ``RedisClusterServer``: three masters with a replica each (``.urls``); one
    module's, like ``kafka_cluster``."""
    with _server("Redis Cluster", services.redis_cluster) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def opensearch_url() -> Iterator[str]:
    """HTTP URL of a single-node OpenSearch."""
    with _server("OpenSearch", services.opensearch_url) as url:
        yield url


@pytest.fixture(scope="module")
def kafka_cluster() -> Iterator[Any]:
    """A ``KafkaCluster`` of three KRaft nodes (``.bootstrap_servers``, ``stop_node``); one
    module's (a single module uses it in each run: its three idle brokers need not outlive
    it)."""
    from compose.launcher.kafka import KafkaCluster

    with _server("Kafka cluster", KafkaCluster) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap servers of a single-node Kafka."""
    with _server("Kafka", services.kafka_bootstrap) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def spark_kafka_jar_paths() -> list[Path]:
    """Jars of Spark's Kafka source matching the installed PySpark."""
    from compose.launcher import spark_kafka_jars

    try:
        return spark_kafka_jars()
    except Exception as exc:
        if _in_ci():
            raise
        pytest.skip(f"Spark Kafka jars unavailable: {exc}")


@pytest.fixture(scope="session")
def spark(spark_kafka_jar_paths: list[Path],
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local Spark session for the whole run, with Spark's Kafka source and Delta Lake
    on its classpath (a JVM's jars and SQL extensions are fixed when its first session
    starts): jobs run in process share it instead of starting a JVM each."""
    from pyspark.sql import SparkSession

    from spark_pipelines.lakehouse import with_delta
    from spark_pipelines.session import (
        COMMON_DEFAULTS,
        DELTA_SNAPSHOT_PARTITIONS,
        with_batch_gc,
    )

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers import the connectors
    builder = SparkSession.builder
    # what the jobs' sessions get: their collector too (G1's concurrent threads took ~12 %
    # more of the JVM's CPU in test_columnar's longest test, 127 s against 112 s)
    for key, value in with_batch_gc(with_delta(COMMON_DEFAULTS)).items():
        builder = builder.config(key, str(value))
    session = (builder.master("local[2]").appName("distributary-tests")
               .config("spark.jars", ",".join(str(jar) for jar in spark_kafka_jar_paths))
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config(DELTA_SNAPSHOT_PARTITIONS, "2")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.local.dir", str(tmp_path_factory.mktemp("spark")))
               .getOrCreate())
    yield session
    session.stop()


@pytest.fixture
def fresh_database(postgres_dsn: str, unique_name: str) -> Iterator[str]:
    """DSN of a new database named ``unique_name``; afterwards its sessions, the slot of the
    same name and the database are removed."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(unique_name)))
    yield postgres_dsn.rsplit("/", 1)[0] + f"/{unique_name}"
    drop_database(postgres_dsn, unique_name)


@pytest.fixture
def unique_name() -> str:
    """A fresh lowercase identifier (slot, publication, index, key prefix) for one test."""
    return f"t_{uuid.uuid4().hex[:10]}"
