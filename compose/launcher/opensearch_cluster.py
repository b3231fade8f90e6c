"""An OpenSearch cluster of N nodes, one JVM each, so a single node can be stopped.

The runner's ``-numOfNode N`` starts N nodes inside one JVM: nothing outside can stop
one of them. So each node here is its own ``DistributaryOpenSearch`` process with
``-numOfNode 1`` (see ``opensearch``), its own home and data directory, a free HTTP and
transport port on 127.0.0.1, and an ``opensearch.yml`` naming every node's transport
port as a discovery seed and every node as an initial cluster manager (the cluster
bootstraps once all are up). The node name is passed as ``-Ddistributary.node.name``
(the runner would call every node "Node 1").

``stop_node`` (SIGTERM: the node leaves cleanly; SIGKILL: it just vanishes) and
``start_node`` (same ports, same data: it rejoins and recovers its shard copies) take one
node down and bring it back. With two master-eligible nodes the voting configuration
holds one of them, the elected cluster manager: stop the other one (``followers``) to
keep the cluster writable; stopping the manager blocks writes until it is back.

Two nodes start in about 18 s on two busy cores once the jars are cached; a node
started again rejoins in about 9 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from typing import Any

from .base import LOOPBACK, LocalServer, free_port, port_open, wait_until
from .jars import resolve_jars, server_java
from .opensearch import _DIRECT, _LOG4J2, _MAIN_CLASS, _compiled_main

CLUSTER_NAME = "distributary-cluster"


class OpenSearchCluster(LocalServer):
    """``nodes`` OpenSearch 2.19 nodes on free loopback ports; ``urls`` has one per node."""

    name = "opensearch-cluster"

    def __init__(self, nodes: int = 2, *, heap: str = "512m",
                 start_timeout: float = 180.0) -> None:
        super().__init__()
        if nodes < 1:
            raise ValueError("an OpenSearch cluster needs at least one node")
        self.http_ports = [free_port() for _ in range(nodes)]
        self.transport_ports = [free_port() for _ in range(nodes)]
        self._heap = heap
        self._start_timeout = start_timeout
        self._nodes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def urls(self) -> list[str]:
        """The HTTP address of every node, node 0 first."""
        return [f"http://{LOOPBACK}:{port}" for port in self.http_ports]

    def node_name(self, number: int) -> str:
        return f"node-{number + 1}"

    def running(self) -> list[int]:
        """The numbers of the nodes whose process runs."""
        return sorted(number for number, proc in self._nodes.items() if proc.poll() is None)

    def cluster_manager(self) -> int:
        """The number of the elected cluster manager, as a running node sees it."""
        answer = self._get(self.running()[0], "/_cat/cluster_manager?format=json")
        name = str(answer[0]["node"])
        return next(number for number in range(len(self.http_ports))
                    if self.node_name(number) == name)

    def followers(self) -> list[int]:
        """The running nodes that are not the elected cluster manager."""
        manager = self.cluster_manager()
        return [number for number in self.running() if number != manager]

    def stop_node(self, number: int, sig: signal.Signals = signal.SIGTERM) -> None:
        """Stop node ``number`` with ``sig`` (SIGTERM: it leaves cleanly), keeping its data
        and ports; return once its HTTP port is closed."""
        proc = self._nodes.pop(number)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        self._procs.remove(proc)
        port = self.http_ports[number]
        wait_until(lambda: not port_open(port), timeout=30, what=f"opensearch node {port} stop")

    def start_node(self, number: int) -> None:
        """Start node ``number`` again over its data; return once it is in the cluster."""
        self._spawn_node(number)
        self._wait_joined(number)

    def wait_green(self, timeout: float = 60) -> None:
        """Until every node is in the cluster and every shard copy is assigned."""
        query = (f"/_cluster/health?wait_for_status=green&wait_for_nodes={len(self.http_ports)}"
                 "&timeout=1s")
        first = self.running()[0]
        wait_until(lambda: _green(self._get(first, query)), timeout=timeout,
                   what="opensearch cluster green", interval=0.25)

    def _start(self) -> None:
        for number in range(len(self.http_ports)):
            self._spawn_node(number)
        for number in range(len(self.http_ports)):
            self._wait_joined(number)

    def _spawn_node(self, number: int) -> None:
        jars = resolve_jars("opensearch")
        classes = _compiled_main(jars)
        home = self.workdir / self.node_name(number)
        config = home / "node_1" / "config"  # the runner's layout for its node 1
        config.mkdir(parents=True, exist_ok=True)
        (config / "opensearch.yml").write_text(self.node_settings(number))
        (config / "log4j2.properties").write_text(_LOG4J2)
        tmp = home / "tmp"
        tmp.mkdir(exist_ok=True)
        classpath = os.pathsep.join([str(classes), *map(str, jars)])
        self._nodes[number] = self._spawn([
            *server_java(), "-Xms256m", f"-Xmx{self._heap}", "-Djava.awt.headless=true",
            "-Dfile.encoding=UTF-8", f"-Djava.io.tmpdir={tmp}",
            f"-Ddistributary.node.name={self.node_name(number)}", "-cp", classpath,
            _MAIN_CLASS, "-basePath", str(home), "-numOfNode", "1",
            "-clusterName", CLUSTER_NAME, "-baseHttpPort", str(self.http_ports[number] - 1),
        ])

    def node_settings(self, number: int) -> str:
        """The ``opensearch.yml`` of node ``number``."""
        settings: dict[str, Any] = {
            "network.host": LOOPBACK,
            "transport.port": self.transport_ports[number],
            "discovery.seed_hosts": [f"{LOOPBACK}:{port}" for port in self.transport_ports],
            "cluster.initial_cluster_manager_nodes": [
                self.node_name(other) for other in range(len(self.http_ports))],
            "cluster.routing.allocation.disk.threshold_enabled": False,
        }
        return "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items())

    def _wait_joined(self, number: int) -> None:
        """Until node ``number`` answers and the cluster it sees holds every running node."""
        proc = self._nodes[number]
        query = f"/_cluster/health?wait_for_nodes={len(self.running())}&timeout=1s"
        wait_until(lambda: not self._get(number, query).get("timed_out", True),
                   timeout=self._start_timeout, what=f"opensearch {self.node_name(number)}",
                   alive=lambda: proc.poll() is None, interval=0.25)

    def _get(self, number: int, path: str) -> Any:
        with _DIRECT.open(self.urls[number] + path, timeout=5) as response:
            return json.load(response)


def _green(health: dict[str, Any]) -> bool:
    return health.get("status") == "green" and not health.get("timed_out", True)
