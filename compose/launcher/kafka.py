"""A single-node Kafka (KRaft, combined broker and controller) from Maven Central jars,
and a cluster of several such nodes (``KafkaCluster``).

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
import signal
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
from .jars import resolve_jars, server_java
from .kafka_security import ListenerSecurity

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
    """One KRaft Kafka node on a free loopback port; ``bootstrap_servers`` is its address.

    ``security`` serves that client listener with TLS and/or SASL (``ListenerSecurity``);
    brokers then talk on a PLAINTEXT listener of their own, ``internal_servers``.
    """

    name = "kafka"

    def __init__(self, *, heap: str = "512m", start_timeout: float = 120.0,
                 security: ListenerSecurity | None = None) -> None:
        super().__init__()
        self.port = free_port()
        self.controller_port = free_port()
        self.bootstrap_servers = f"{LOOPBACK}:{self.port}"
        self.security = security or ListenerSecurity()
        self.internal_servers = (self.bootstrap_servers if self.security.plaintext
                                 else f"{LOOPBACK}:{free_port()}")
        self._heap = heap
        self._start_timeout = start_timeout

    def _start(self) -> None:
        jars = resolve_jars("kafka")
        properties = self.workdir / "server.properties"
        properties.write_text(self._server_properties())
        log4j2 = self.workdir / "log4j2.properties"
        log4j2.write_text(_LOG4J2)
        jvm = [*server_java(), "-Xms128m", f"-Xmx{self._heap}", "-Djava.awt.headless=true",
               f"-Dlog4j2.configurationFile={log4j2}", f"-Djava.io.tmpdir={self.workdir}",
               "-cp", os.pathsep.join(map(str, jars))]
        run_checked([*jvm, "kafka.tools.StorageTool", "format", "--ignore-formatted",
                     "-t", _random_cluster_id(), "-c", str(properties),
                     *self.security.format_arguments()],
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
            **self._listeners(controller),
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

    def _listeners(self, controller: str) -> dict[str, object]:
        """One PLAINTEXT listener for clients and brokers; with ``security``, a ``CLIENT``
        listener served as it says and a PLAINTEXT ``BROKER`` one."""
        if self.security.plaintext:
            return {"listeners": f"PLAINTEXT://{self.bootstrap_servers},"
                                 f"CONTROLLER://{controller}",
                    "advertised.listeners": f"PLAINTEXT://{self.bootstrap_servers}",
                    "controller.listener.names": "CONTROLLER",
                    "inter.broker.listener.name": "PLAINTEXT",
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
                                                      "CONTROLLER:PLAINTEXT"}
        clients, brokers = self.bootstrap_servers, self.internal_servers
        return {"listeners": f"CLIENT://{clients},BROKER://{brokers},CONTROLLER://{controller}",
                "advertised.listeners": f"CLIENT://{clients},BROKER://{brokers}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "BROKER",
                "listener.security.protocol.map": f"CLIENT:{self.security.protocol},"
                                                  "BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
                **self.security.listener_properties("CLIENT", self.workdir)}

    def _metadata_ready(self) -> bool:
        """True once a metadata request through the Kafka protocol lists this broker."""
        try:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient
        except ImportError:  # no Python client installed: an open port has to do
            return True
        admin: Any = AdminClient({"bootstrap.servers": self.internal_servers,
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


class KafkaCluster(LocalServer):
    """``nodes`` KRaft Kafka nodes (each a broker and a controller voter) on free
    loopback ports, internal topics replicated to three with two in sync (fewer on a
    smaller cluster); ``stop_node``/``start_node`` take one node down and back."""

    name = "kafka-cluster"

    def __init__(self, nodes: int = 3, *, heap: str = "384m",
                 start_timeout: float = 180.0) -> None:
        super().__init__()
        self.ports = [(free_port(), free_port()) for _ in range(nodes)]
        self.bootstrap_servers = ",".join(f"{LOOPBACK}:{port}" for port, _ in self.ports)
        self._heap = heap
        self._start_timeout = start_timeout
        self._nodes: dict[int, Any] = {}  # node id → its process
        self._jvm: list[str] = []

    def _start(self) -> None:
        jars = resolve_jars("kafka")
        log4j2 = self.workdir / "log4j2.properties"
        log4j2.write_text(_LOG4J2)
        self._jvm = [*server_java(), "-Xms128m", f"-Xmx{self._heap}",
                     "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j2}",
                     f"-Djava.io.tmpdir={self.workdir}", "-cp", os.pathsep.join(map(str, jars))]
        cluster_id = _random_cluster_id()
        for node in self.node_ids:
            properties = self._properties_path(node)
            properties.parent.mkdir(parents=True, exist_ok=True)
            properties.write_text(self._server_properties(node))
            run_checked([*self._jvm, "kafka.tools.StorageTool", "format", "--ignore-formatted",
                         "-t", cluster_id, "-c", str(properties)],
                        what=f"kafka node {node} storage format")
        for node in self.node_ids:
            self._nodes[node] = self._spawn([*self._jvm, "kafka.Kafka",
                                             str(self._properties_path(node))])
        wait_until(lambda: self._brokers() == set(self.node_ids), timeout=self._start_timeout,
                   what=f"kafka cluster on {self.bootstrap_servers}", alive=self._alive,
                   interval=0.5)

    @property
    def node_ids(self) -> list[int]:
        return list(range(1, len(self.ports) + 1))

    def stop_node(self, node: int) -> None:
        """Kill node ``node`` (SIGKILL: a broker lost, not shut down)."""
        process = self._nodes.pop(node)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    def start_node(self, node: int) -> None:
        """Start node ``node`` again and wait until the cluster lists it."""
        self._nodes[node] = self._spawn([*self._jvm, "kafka.Kafka",
                                         str(self._properties_path(node))])
        port = self.ports[node - 1][0]
        wait_until(lambda: port_open(port) and node in self._brokers(),
                   timeout=self._start_timeout, what=f"kafka node {node}", interval=0.5)

    def _properties_path(self, node: int) -> Any:
        return self.workdir / f"node{node}" / "server.properties"

    def _server_properties(self, node: int) -> str:
        port, controller_port = self.ports[node - 1]
        voters = ",".join(f"{n}@{LOOPBACK}:{c}" for n, (_, c) in zip(self.node_ids,
                                                                       self.ports, strict=True))
        replicas = min(3, len(self.ports))
        in_sync = 2 if replicas >= 3 else 1
        settings: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": node,
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{LOOPBACK}:{port},CONTROLLER://{LOOPBACK}:"
                         f"{controller_port}",
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.workdir / f"node{node}" / "data",
            "num.partitions": 1,
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": in_sync,
            "transaction.state.log.num.partitions": 1,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": in_sync,
            "group.initial.rebalance.delay.ms": 0,
            "replica.lag.time.max.ms": 5000,
            "broker.session.timeout.ms": 6000,
            "broker.heartbeat.interval.ms": 1000,
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def _brokers(self) -> set[int]:
        """The node ids a metadata request lists as brokers now."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin: Any = AdminClient({"bootstrap.servers": self.bootstrap_servers,
                                  "socket.connection.setup.timeout.ms": 2000,
                                  "log_level": 0})  # a node down is expected here
        with contextlib.suppress(KafkaException):
            return set(admin.list_topics(timeout=2).brokers)
        return set()
