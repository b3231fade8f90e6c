"""A single-node Kafka (KRaft, combined broker and controller) from Maven Central jars.

``org.apache.kafka:kafka_2.13`` 4.3.1 runs on JDK 17 and logs through SLF4J to Log4j 2
(``compose/jars/kafka.xml``). The storage is formatted with ``kafka.tools.StorageTool``
under a random cluster id; both listeners bind free ports on 127.0.0.1; internal topics
have one replica and one partition, and a consumer group's first rebalance is not delayed.
The server is ready when its port answers and a metadata request lists the broker.
"""

from __future__ import annotations

import base64
import contextlib
import os
import uuid
from typing import Any

from .base import (
    LOOPBACK,
    LocalServer,
    free_port,
    port_open,
    run_checked,
    wait_until,
)
from .jars import jdk_tool, resolve_jars

_NODE_ID = 1
_LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
"""


class KafkaServer(LocalServer):
    """One KRaft Kafka node on a free loopback port; ``bootstrap_servers`` is its address."""

    name = "kafka"

    def __init__(self, *, heap: str = "512m", start_timeout: float = 120.0) -> None:
        super().__init__()
        self.port = free_port()
        self.controller_port = free_port()
        self.bootstrap_servers = f"{LOOPBACK}:{self.port}"
        self._heap = heap
        self._start_timeout = start_timeout

    def _start(self) -> None:
        jars = resolve_jars("kafka")
        properties = self.workdir / "server.properties"
        properties.write_text(self._server_properties())
        log4j2 = self.workdir / "log4j2.properties"
        log4j2.write_text(_LOG4J2)
        jvm = [jdk_tool("java"), "-Xms128m", f"-Xmx{self._heap}", "-Djava.awt.headless=true",
               f"-Dlog4j2.configurationFile={log4j2}", f"-Djava.io.tmpdir={self.workdir}",
               "-cp", os.pathsep.join(map(str, jars))]
        run_checked([*jvm, "kafka.tools.StorageTool", "format", "--ignore-formatted",
                     "-t", _random_cluster_id(), "-c", str(properties)],
                    what="kafka storage format")
        self._spawn([*jvm, "kafka.Kafka", str(properties)])
        what = f"kafka on {self.bootstrap_servers}"
        wait_until(lambda: port_open(self.port), timeout=self._start_timeout, what=what,
                   alive=self._alive)
        wait_until(self._metadata_ready, timeout=self._start_timeout, what=what,
                   alive=self._alive, interval=0.25)

    def _server_properties(self) -> str:
        controller = f"{LOOPBACK}:{self.controller_port}"
        settings: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": _NODE_ID,
            "controller.quorum.voters": f"{_NODE_ID}@{controller}",
            "listeners": f"PLAINTEXT://{self.bootstrap_servers},CONTROLLER://{controller}",
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap_servers}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.workdir / "data",
            "num.partitions": 1,
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def _metadata_ready(self) -> bool:
        """True once a metadata request through the Kafka protocol lists this broker."""
        try:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient
        except ImportError:  # no Python client installed: an open port has to do
            return True
        admin: Any = AdminClient({"bootstrap.servers": self.bootstrap_servers,
                                  "socket.connection.setup.timeout.ms": 2000})
        with contextlib.suppress(KafkaException):
            metadata = admin.list_topics(timeout=2)
            return _NODE_ID in metadata.brokers
        return False


def _random_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes in URL-safe base64 that does not start with '-'."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
