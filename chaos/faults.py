"""The fault schedule: which fault strikes when, and how each is done and undone.

Kinds: ``kill_capture`` and ``kill_connect`` (SIGKILL the child; its supervisor starts
it again; with several capture replicas, the one streaming), ``stall_capture`` (SIGSTOP
of the streaming replica for ``stall_s``, longer than the takeover time, then SIGCONT:
the zombie that must find itself fenced), ``stop_opensearch`` and ``stop_redis`` (down
for ``outage_s``, then started again over their data), ``kill_broker`` (one Kafka node
SIGKILLed for ``outage_s``, then started again), ``restart_postgres`` (``pg_ctl -m
fast`` and start), and ``fill_disk`` (the log's filesystem full for ``disk_full_s``, then
freed). Times are drawn at random (seeded) over the workload's duration; outages and
stalls run in their own threads, so kills keep coming while a server is down.
"""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .diskfill import SmallFilesystem
from .processes import SupervisedProcess
from .replicas import CaptureReplicas
from .servers import ChaosServers

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FaultPlan:
    """How many faults of each kind, and how long the outages last."""

    kill_capture: int
    kill_connect: int
    stop_opensearch: int
    stop_redis: int
    restart_postgres: int
    fill_disk: int
    outage_s: float
    disk_full_s: float
    stall_capture: int = 0  # needs two capture replicas (the Kafka backend)
    kill_broker: int = 0  # needs a Kafka cluster the harness may stop nodes of
    stall_s: float = 10.0  # longer than capture.takeover_after (6 s)

    def kinds(self) -> list[str]:
        """One entry per fault to inject."""
        return [kind for kind in (*POINT_FAULTS, *SPREAD_FAULTS)
                for _ in range(getattr(self, kind))]


POINT_FAULTS = ("kill_capture", "kill_connect", "stall_capture")  # at any time
SPREAD_FAULTS = ("stop_opensearch", "stop_redis", "kill_broker", "restart_postgres",
                 "fill_disk")  # spread evenly, one at a time per kind


def schedule(plan: FaultPlan, duration: float, rng: random.Random) -> list[tuple[float, str]]:
    """(seconds after the start, kind) for every fault, in time order.

    Faults start after a short warm-up and leave the outages time to end before the
    workload does; two outages of one server never overlap (they are spread evenly).
    """
    warmup = min(5.0, duration / 10)
    last = max(warmup + 1, duration - max(plan.outage_s, plan.disk_full_s) - 2)
    timed: list[tuple[float, str]] = []
    for kind in plan.kinds():
        if kind in POINT_FAULTS:
            timed.append((rng.uniform(warmup, duration - 1), kind))
    for kind in SPREAD_FAULTS:
        count = getattr(plan, kind)
        span = (last - warmup) / max(count, 1)
        for number in range(count):
            slot_start = warmup + number * span
            hold = plan.disk_full_s if kind == "fill_disk" else plan.outage_s
            timed.append((rng.uniform(slot_start, max(slot_start, slot_start + span - hold)),
                          kind))
    return sorted(timed)


class FaultInjector:
    """Runs a schedule against the harness's servers, children and log filesystem."""

    def __init__(self, plan: FaultPlan, servers: ChaosServers, captures: CaptureReplicas,
                 connect: SupervisedProcess, disk: SmallFilesystem,
                 kafka_cluster: Any = None) -> None:
        self.plan = plan
        self.servers = servers
        self.captures = captures
        self.connect = connect
        self.disk = disk
        self.kafka_cluster = kafka_cluster  # a KafkaCluster, for kill_broker
        self._brokers_killed = 0
        self.done: Counter[str] = Counter()
        self.errors: list[str] = []
        self._outages: list[threading.Thread] = []
        self._stalled: set[SupervisedProcess] = set()  # capture replicas under SIGSTOP

    def run(self, timed: list[tuple[float, str]], stop: threading.Event) -> None:
        """Inject each fault at its time (until ``stop``), then wait for outages to end."""
        start = time.monotonic()
        for at, kind in timed:
            if stop.wait(max(0.0, start + at - time.monotonic())):
                break
            self._inject(kind)
        for thread in self._outages:
            thread.join()

    def _inject(self, kind: str) -> None:
        log.info("fault: %s", kind)
        if kind == "kill_capture":  # not a stalled one: its standby must take over first
            self._kill(kind, self.captures.streaming(timeout=30, besides=self._stalled))
        elif kind == "kill_connect":
            self._kill(kind, self.connect)
        elif kind == "stall_capture":
            self._stall()
        elif kind == "kill_broker":
            cluster = self.kafka_cluster
            node = cluster.node_ids[self._brokers_killed % len(cluster.node_ids)]
            self._brokers_killed += 1
            self._outage(kind, lambda: cluster.stop_node(node),
                         lambda: cluster.start_node(node), self.plan.outage_s)
        elif kind == "stop_opensearch":
            opensearch = self.servers.opensearch
            self._outage(kind, opensearch.stop_process, opensearch.start_again,
                         self.plan.outage_s)
        elif kind == "stop_redis":
            redis = self.servers.redis
            self._outage(kind, redis.stop_process, redis.start_again, self.plan.outage_s)
        elif kind == "restart_postgres":
            if self._guarded(kind, lambda: self.servers.postgres.restart("fast")):
                self.done[kind] += 1
        elif kind == "fill_disk":
            self._outage(kind, self._fill, self.disk.free, self.plan.disk_full_s)

    def _fill(self) -> None:
        written = self.disk.fill()
        log.info("log filesystem full (%d bytes of filler)", written)

    def _kill(self, kind: str, process: SupervisedProcess) -> None:
        # a kill of a process that is between runs would hit nothing: wait for the next run
        if process.wait_alive(timeout=30) and process.kill():
            self.done[kind] += 1
        else:
            self.errors.append(f"{kind}: no process was running for 30 s")

    def _stall(self) -> None:
        """SIGSTOP the streaming replica for ``stall_s`` (a standby takes over), then
        SIGCONT: it must notice it was fenced and stand by, writing nothing."""
        process = self.captures.streaming(timeout=30, besides=self._stalled)

        def stall() -> None:
            self._signal(process, signal.SIGSTOP)
            self._stalled.add(process)

        def resume() -> None:
            self._stalled.discard(process)
            self._signal(process, signal.SIGCONT)
        self._outage("stall_capture", stall, resume, self.plan.stall_s)

    @staticmethod
    def _signal(process: SupervisedProcess, signum: int) -> None:
        if not process.signal(signum):
            raise RuntimeError(f"no {process.name} process was running")

    def _guarded(self, kind: str, action: Callable[[], None]) -> bool:
        try:
            action()
        except Exception as exc:
            self.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
            return False
        return True

    def _outage(self, kind: str, down: Callable[[], None], up: Callable[[], None],
                seconds: float) -> None:
        def outage() -> None:
            if self._guarded(kind, down):
                self.done[kind] += 1
            time.sleep(seconds)
            self._guarded(f"{kind} (undo)", up)

        thread = threading.Thread(target=outage, name=kind, daemon=True)
        thread.start()
        self._outages.append(thread)

    @property
    def total(self) -> int:
        """Faults injected so far."""
        return sum(self.done.values())
