"""Where a test, the demo or a benchmark gets each server from.

In order: an existing server named by an environment variable; testcontainers when a
Docker engine answers (users' machines); otherwise the local launcher of this package.
``DISTRIBUTARY_LAUNCHER=local`` forces the local launcher.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .base import ServerError

if TYPE_CHECKING:
    from .redis_cluster import RedisClusterServer

ENV_POSTGRES = "DISTRIBUTARY_TEST_PG_DSN"
ENV_POSTGRES_VERSION = "DISTRIBUTARY_TEST_PG_VERSION"
ENV_REDIS = "DISTRIBUTARY_TEST_REDIS_URL"
ENV_OPENSEARCH = "DISTRIBUTARY_TEST_OPENSEARCH_URL"
ENV_KAFKA = "DISTRIBUTARY_TEST_KAFKA_BOOTSTRAP"


def docker_engine_answers() -> bool:
    """True when a Docker engine answers on its socket (and the local launcher is not forced)."""
    if os.environ.get("DISTRIBUTARY_LAUNCHER") == "local":
        return False
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return False
    path = Path(host.removeprefix("unix://"))
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        try:
            sock.connect(str(path))
            sock.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            return b"OK" in sock.recv(1024)
        except OSError:
            return False


@contextlib.contextmanager
def postgres_dsn() -> Iterator[str]:
    """A superuser DSN of a PostgreSQL with ``wal_level=logical`` (of major version
    ``DISTRIBUTARY_TEST_PG_VERSION`` when set: ``make test-matrix``)."""
    version = os.environ.get(ENV_POSTGRES_VERSION)
    if os.environ.get(ENV_POSTGRES):
        yield os.environ[ENV_POSTGRES]
    elif docker_engine_answers():
        from testcontainers.postgres import PostgresContainer

        container = PostgresContainer(f"postgres:{version or 16}", driver=None).with_command(
            "postgres -c wal_level=logical -c max_replication_slots=32 -c max_wal_senders=32")
        with container:
            yield container.get_connection_url()
    else:
        from .postgres import PostgresServer

        with PostgresServer(version=int(version) if version else None) as server:
            yield server.dsn()


@contextlib.contextmanager
def redis_url() -> Iterator[str]:
    """A Redis URL."""
    if os.environ.get(ENV_REDIS):
        yield os.environ[ENV_REDIS]
    elif docker_engine_answers():
        from testcontainers.redis import RedisContainer

        with RedisContainer("redis:7") as container:
            host = container.get_container_host_ip()
            yield f"redis://{host}:{container.get_exposed_port(6379)}/0"
    else:
        from .redis import RedisServer

        with RedisServer() as server:
            yield server.url


@contextlib.contextmanager
def redis_cluster() -> Iterator[RedisClusterServer]:
    """A Redis Cluster of three masters with a replica each, always from the local
    launcher: its tests kill and start nodes."""
    from .redis_cluster import RedisClusterServer

    with RedisClusterServer() as cluster:
        yield cluster


@contextlib.contextmanager
def opensearch_url() -> Iterator[str]:
    """An OpenSearch HTTP URL (single node, security off)."""
    if os.environ.get(ENV_OPENSEARCH):
        yield os.environ[ENV_OPENSEARCH]
    elif docker_engine_answers():
        from testcontainers.opensearch import OpenSearchContainer

        with OpenSearchContainer("opensearchproject/opensearch:2.19.1") as container:
            config = container.get_config()
            yield f"http://{config['host']}:{config['port']}"
    else:
        from .opensearch import OpenSearchServer

        with OpenSearchServer() as server:
            yield server.url


@contextlib.contextmanager
def kafka_bootstrap() -> Iterator[str]:
    """Kafka bootstrap servers (``host:port``) of a single-node cluster."""
    if os.environ.get(ENV_KAFKA):
        yield os.environ[ENV_KAFKA]
    elif docker_engine_answers():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer("confluentinc/cp-kafka:7.6.1").with_kraft() as container:
            yield container.get_bootstrap_server()
    else:
        from .kafka import KafkaServer

        with KafkaServer() as server:
            yield server.bootstrap_servers


__all__ = ["ServerError", "docker_engine_answers", "kafka_bootstrap", "opensearch_url",
           "postgres_dsn", "redis_cluster", "redis_url"]
