"""Capture takeover (``make bench-failover``): two replicas, faults on the streaming one.

Starts PostgreSQL and Kafka, runs two ``cdc capture`` replicas of one pipeline on the
Kafka log (``capture.takeover_after`` at its default), commits 5,000 rows/s (100
transactions of 50 inserts a second) and faults the streaming replica 20 times
(``BENCH_FAULTS``), kill -9 and SIGSTOP alternating. A killed replica is started again
(it stands by); a stopped one is continued once its successor streams (it must find
itself fenced and stand by). For each fault: the seconds from the fault until the first
row committed after it is in the log, read by a ``read_committed`` consumer. After the
load, every committed row must be in the log exactly once.

Prints ``name=value`` lines, the headline last: ``failover_takeover_p50_s``,
``failover_lost`` (committed rows not in the log), ``failover_duplicated`` (rows logged
more than once), ``failover_zombie_writes`` (records whose position is not past the
previous record of their partition: written by a replica after its successor had
written more), ``failover_takeover_p99_s``. The target is absolute (p99 ≤ 10 s, the
rest 0): the faults are the reference here, not another program.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psycopg

from cdc.log.kafka.headers import to_message
from compose.launcher import KafkaServer, PostgresServer

FAULTS = int(os.environ.get("BENCH_FAULTS", "20"))
ROWS_PER_TX, TX_PER_S = 50, 100
SLOT = "failover"
TOPIC = f"{SLOT}.public.ticks"


@dataclass
class Clock:
    """Commits and arrivals, shared by the threads (monotonic seconds)."""

    commits: list[tuple[float, int]] = field(default_factory=list)  # (time, first id)
    arrived: dict[int, float] = field(default_factory=dict)
    logged: Counter[int] = field(default_factory=Counter)
    zombie_writes: int = 0
    last_id: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def first_after(self, moment: float) -> int | None:
        """The first row committed after ``moment``."""
        with self.lock:
            at = bisect_right([t for t, _ in self.commits], moment)
            return self.commits[at][1] if at < len(self.commits) else None


def write_rows(dsn: str, clock: Clock, stop: threading.Event) -> None:
    """5,000 rows/s in transactions of 50, paced by the clock."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        next_id, started, done = 1, time.monotonic(), 0
        while not stop.is_set():
            with conn.transaction():
                conn.execute("INSERT INTO ticks SELECT g, 'tick' FROM "
                             "generate_series(%s::bigint, %s::bigint) g",
                             (next_id, next_id + ROWS_PER_TX - 1))
            with clock.lock:
                clock.commits.append((time.monotonic(), next_id))
                clock.last_id = next_id + ROWS_PER_TX - 1
            next_id += ROWS_PER_TX
            done += 1
            ahead = started + done / TX_PER_S - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)


def read_log(bootstrap: str, clock: Clock, stop: threading.Event) -> None:
    """Every committed record of the table's topic: arrival time, count and order."""
    from confluent_kafka import Consumer, TopicPartition

    consumer: Any = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-failover",
                              "isolation.level": "read_committed",
                              "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    while not stop.is_set():
        topic = consumer.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        if topic is not None and topic.error is None and topic.partitions:
            break
        time.sleep(0.2)
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in topic.partitions])
    last: dict[int, tuple[int, int]] = {}
    while not stop.is_set():
        for raw in consumer.consume(1000, 0.2):
            if raw.error() is not None:
                continue
            message, now = to_message(raw), time.monotonic()
            row = int(orjson.loads(message.value)["after"]["id"])
            position = (message.position.commit_lsn, message.position.seq)
            with clock.lock:
                clock.arrived.setdefault(row, now)
                clock.logged[row] += 1
                if position <= last.get(message.partition, (-1, -1)):
                    clock.zombie_writes += 1
                last[message.partition] = max(position, last.get(message.partition, position))
    consumer.close()


def pipeline_yaml(dsn: str, bootstrap: str) -> str:
    return f"""
source: {{dsn: "{dsn}", slot: {SLOT}, publication: {SLOT}, tables: [public.ticks],
         heartbeat_interval: 1s}}
log: {{backend: kafka, bootstrap_servers: ["{bootstrap}"], partitions: 3}}
"""


class Replicas:
    """The two ``cdc capture`` processes, by the pid their walsender names."""

    def __init__(self, config: Path, workdir: Path) -> None:
        self.config, self.workdir = config, workdir
        self.processes: list[subprocess.Popen[bytes]] = []
        self.started = 0

    def start(self) -> subprocess.Popen[bytes]:
        self.started += 1
        with (self.workdir / f"capture-{self.started}.log").open("ab") as err:
            process = subprocess.Popen([sys.executable, "-m", "cdc.cli", "capture", "-c",
                                        str(self.config)], stdout=subprocess.DEVNULL,
                                       stderr=err)
        self.processes.append(process)
        return process

    def streaming(self, dsn: str) -> subprocess.Popen[bytes] | None:
        """The replica whose walsender streams the slot now."""
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT r.application_name FROM pg_replication_slots s JOIN "
                "pg_stat_replication r ON r.pid = s.active_pid WHERE s.slot_name = %s "
                "AND r.state = 'streaming'", (SLOT,)).fetchone()
        if row is None:
            return None
        pid = int(str(row[0]).rsplit(" ", 1)[-1])
        return next((p for p in self.processes if p.pid == pid and p.poll() is None), None)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise SystemExit(f"bench-failover: {what} within {timeout:.0f} s")
        time.sleep(0.05)
    return found


def fault_once(number: int, dsn: str, replicas: Replicas, clock: Clock) -> float:
    """One fault on the streaming replica; seconds until a row committed after it is
    logged."""
    active = wait_for(lambda: replicas.streaming(dsn), 60, "no replica streams")
    kill = number % 2 == 0
    moment = time.monotonic()
    active.send_signal(signal.SIGKILL if kill else signal.SIGSTOP)
    row = wait_for(lambda: clock.first_after(moment), 30, "no commit after the fault")
    arrived = wait_for(lambda: clock.arrived.get(row), 120, "no takeover")
    if kill:
        active.wait(timeout=30)
        replicas.start()
    else:
        active.send_signal(signal.SIGCONT)
    wait_for(lambda: sum(p.poll() is None for p in replicas.processes) == 2, 30,
             "two replicas running")
    time.sleep(3.0)  # the other one connects and stands by
    return float(arrived - moment)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def main() -> None:
    """Start the servers and the replicas, fault, print the figures."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    takeovers: list[float] = []
    with PostgresServer() as pg, KafkaServer() as kafka:
        dsn = pg.dsn()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE ticks (id bigint PRIMARY KEY, note text)")
        config = workdir / "pipeline.yaml"
        config.write_text(pipeline_yaml(dsn, kafka.bootstrap_servers))
        replicas = Replicas(config, workdir)
        clock, stop = Clock(), threading.Event()
        threads = [threading.Thread(target=write_rows, args=(dsn, clock, stop)),
                   threading.Thread(target=read_log, args=(kafka.bootstrap_servers, clock,
                                                           stop))]
        try:
            replicas.start()
            wait_for(lambda: replicas.streaming(dsn), 120, "the first replica streaming")
            replicas.start()
            for thread in threads:
                thread.start()
            wait_for(lambda: len(clock.arrived) > 5_000, 120, "the first rows logged")
            for number in range(FAULTS):
                takeovers.append(fault_once(number, dsn, replicas, clock))
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
            final, done = Clock(), threading.Event()  # the whole topic read again
            reader = threading.Thread(target=read_log, args=(kafka.bootstrap_servers, final,
                                                             done))
            reader.start()
            try:
                wait_for(lambda: len(final.logged) >= clock.last_id, 180, "every row logged")
                time.sleep(1.0)  # anything logged twice arrives too
            finally:
                done.set()
                reader.join(timeout=30)
        finally:
            stop.set()
            replicas.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    lost = sum(1 for row in range(1, clock.last_id + 1) if final.logged[row] == 0)
    duplicated = sum(count - 1 for count in final.logged.values() if count > 1)
    print(f"failover_faults={len(takeovers)}")
    print(f"failover_rows={clock.last_id}")
    kills, stops = takeovers[0::2], takeovers[1::2]
    print(f"failover_kill_takeover_p50_s={percentile(kills, 0.5):.2f}")
    print(f"failover_stop_takeover_p50_s={percentile(stops, 0.5):.2f}")
    print(f"failover_takeover_p50_s={percentile(takeovers, 0.5):.2f}")
    print(f"failover_takeover_max_s={max(takeovers, default=0.0):.2f}")
    print(f"failover_lost={lost}")
    print(f"failover_duplicated={duplicated}")
    print(f"failover_zombie_writes={final.zombie_writes}")
    print(f"failover_takeover_p99_s={percentile(takeovers, 0.99):.2f}")


if __name__ == "__main__":
    main()
