"""Real servers without Docker: PostgreSQL, Redis, OpenSearch and Kafka as local processes.

Used by tests, the demo and the benchmarks; ``services`` picks the launcher, a Docker
engine through testcontainers, or an existing server named by an environment variable.
"""

from .base import LocalServer, ServerError, cache_dir, file_lock, free_port
from .jars import resolve_jars, spark_kafka_jars
from .kafka import KafkaServer
from .opensearch import OpenSearchServer
from .postgres import PostgresServer
from .redis import RedisServer

__all__ = [
    "KafkaServer",
    "LocalServer",
    "OpenSearchServer",
    "PostgresServer",
    "RedisServer",
    "ServerError",
    "cache_dir",
    "file_lock",
    "free_port",
    "resolve_jars",
    "spark_kafka_jars",
]
