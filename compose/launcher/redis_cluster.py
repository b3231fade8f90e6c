"""A Redis Cluster from the machine's packages: six ``redis-server --cluster-enabled yes``
on free loopback ports (three masters with a replica each), joined by
``redis-cli --cluster create``; in-memory only, node timeout short so a failover is quick."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from typing import Any, NamedTuple

import redis

from .base import LOOPBACK, LocalServer, ServerError, free_port, port_open, run_checked, wait_until

NODES = 6
NODE_TIMEOUT_MS = 1000


class _SlotMove(NamedTuple):
    """A slot being moved (``RedisClusterServer.start_slot_move``): the ports of its old
    and new master, and every master's node id by port."""

    source: int
    target: int
    ids: dict[int, str]


class RedisClusterServer(LocalServer):
    """Six nodes; ``kill`` (SIGKILL) one and ``start_node`` it again (it rejoins as a
    replica); ``wait_failed_over`` waits until every slot has a live master again;
    ``move_slot`` moves a slot, or ``start_slot_move``, ``migrate_keys`` and
    ``finish_slot_move`` one step at a time (a slot left mid-migration between them)."""

    name = "redis-cluster"

    def __init__(self) -> None:
        super().__init__()
        self.ports = [free_port() for _ in range(NODES)]
        self._bus_ports = [free_port() for _ in range(NODES)]
        self._nodes: dict[int, subprocess.Popen[bytes]] = {}
        self._moves: dict[int, _SlotMove] = {}  # slot -> its move, started not finished

    @property
    def urls(self) -> list[str]:
        """A seed URL per node."""
        return [f"redis://{LOOPBACK}:{port}" for port in self.ports]

    def masters(self) -> list[int]:
        """The ports of the live masters, as a live node sees them."""
        return [port for port, role in self._roles().items() if role == "master"]

    def kill(self, port: int) -> None:
        """SIGKILL the node on ``port`` (no shutdown, no last words)."""
        proc = self._nodes.pop(port)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        self._procs.remove(proc)

    def start_node(self, port: int) -> None:
        """Start the node of ``port`` again (it keeps its identity: ``nodes.conf``)."""
        self._spawn_node(self.ports.index(port))
        wait_until(lambda: port_open(port), timeout=30, what=f"redis node {port}")

    def move_slot(self, slot: int, to_port: int) -> None:
        """Move ``slot`` and its keys to the master on ``to_port``, as a resharding does
        (``IMPORTING``/``MIGRATING``, ``MIGRATE`` in batches, ``SETSLOT NODE``)."""
        if self.start_slot_move(slot, to_port):
            self.finish_slot_move(slot)

    def start_slot_move(self, slot: int, to_port: int) -> bool:
        """Open the move of ``slot`` to the master on ``to_port``, as a resharding starts
        one: ``IMPORTING`` there, ``MIGRATING`` on its master, every key still where it
        was (the masters answer ``ASK`` and ``TRYAGAIN`` for it until
        ``finish_slot_move``); ``migrate_keys`` moves some. False if the slot is there."""
        ids = {port: self._command(port, "CLUSTER", "MYID") for port in self.masters()}
        source = next(port for port, node_id in ids.items()
                      if slot in self._held_slots(port, node_id))
        if source == to_port:
            return False
        self._command(to_port, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source])
        self._command(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to_port])
        self._moves[slot] = _SlotMove(source, to_port, ids)
        return True

    def migrate_keys(self, slot: int, keys: Sequence[str | bytes]) -> None:
        """``MIGRATE`` ``keys`` (of ``slot``, being moved: ``start_slot_move``) to the
        slot's new master; keys not on the old one are left out."""
        if keys:
            self._migrate(self._moves[slot], keys)

    def finish_slot_move(self, slot: int) -> None:
        """``MIGRATE`` the keys of ``slot`` still on its old master in batches, then give
        the slot to the new one on every master (``SETSLOT NODE``)."""
        move = self._moves[slot]
        while keys := self._command(move.source, "CLUSTER", "GETKEYSINSLOT", slot, 1000):
            self._migrate(move, keys)
        for port in (move.target, move.source, *move.ids):
            self._command(port, "CLUSTER", "SETSLOT", slot, "NODE", move.ids[move.target])
        del self._moves[slot]

    def _migrate(self, move: _SlotMove, keys: Sequence[str | bytes]) -> None:
        """``MIGRATE`` ``keys`` from the old master of ``move`` to its new one (a key
        that is not there is left out; none there: ``NOKEY``, nothing done)."""
        self._command(move.source, "MIGRATE", LOOPBACK, move.target, "", 0, 5000,
                      "KEYS", *keys)

    def _held_slots(self, port: int, node_id: str) -> set[int]:
        """The slots the master on ``port`` holds, by its own view of the cluster."""
        held: set[int] = set()
        for start, end, *nodes in self._command(port, "CLUSTER", "SLOTS"):
            if nodes[0][2] == node_id:
                held.update(range(start, end + 1))
        return held

    def _command(self, port: int, *args: object) -> Any:
        """One command to the node on ``port`` (replies decoded)."""
        with redis.Redis(host=LOOPBACK, port=port, socket_timeout=5,
                         decode_responses=True) as node:
            return node.execute_command(*args)

    def wait_failed_over(self, timeout: float = 60) -> None:
        """Until every live node says ``cluster_state:ok`` and no master is down."""
        wait_until(self._healthy, timeout=timeout, what="redis cluster failover")

    def _start(self) -> None:
        for number in range(NODES):
            self._spawn_node(number)
        wait_until(lambda: all(map(port_open, self.ports)), timeout=30, what="redis nodes",
                   alive=self._alive)
        cli = shutil.which("redis-cli")
        if cli is None:
            raise ServerError("redis-cli not found: install the Debian package 'redis-tools'")
        run_checked([cli, "--cluster", "create",
                     *(f"{LOOPBACK}:{port}" for port in self.ports),
                     "--cluster-replicas", "1", "--cluster-yes"], what="redis cluster create",
                    timeout=120)
        wait_until(self._healthy, timeout=60, what="redis cluster", alive=self._alive)

    def _spawn_node(self, number: int) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServerError("redis-server not found: install the Debian package "
                              "'redis-server' (make setup does)")
        port = self.ports[number]
        workdir = self.workdir / str(port)
        workdir.mkdir(exist_ok=True)
        self._nodes[port] = self._spawn([
            binary, "--port", str(port), "--cluster-port", str(self._bus_ports[number]),
            "--bind", LOOPBACK, "--dir", str(workdir), "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--save", "",
            "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes"])

    def _healthy(self) -> bool:
        """Every live node has ``cluster_state:ok``, every live replica its master, and
        the three masters are live processes (a killed one is not yet seen as failed)."""
        for port in self._nodes:
            with redis.Redis(host=LOOPBACK, port=port, socket_timeout=2) as node:
                if node.cluster("INFO").get("cluster_state") != "ok":
                    return False
                info = node.info("replication")
                if info.get("role") == "slave" and info.get("master_link_status") != "up":
                    return False
        masters = [port for port, role in self._roles().items() if role == "master"]
        return len(masters) == 3 and all(port in self._nodes for port in masters)

    def _roles(self) -> dict[int, str]:
        """Port → ``master``/``slave`` of the live nodes (nodes marked failed left out)."""
        port = next(iter(self._nodes))
        with redis.Redis(host=LOOPBACK, port=port, socket_timeout=2,
                         decode_responses=True) as node:
            nodes = node.cluster("NODES")
        roles = {}
        for address, facts in nodes.items():
            flags = set(str(facts["flags"]).split(","))
            if flags & {"fail", "fail?", "handshake", "noaddr"}:
                continue
            roles[int(address.split(":")[1].split("@")[0])] = \
                "master" if "master" in flags else "slave"
        return roles
