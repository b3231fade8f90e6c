"""Backpressure ``block`` across processes on Kafka: a group's policy is recorded on the
broker, so a capture's log in another process sees the group lag beyond its bound."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest
from confluent_kafka.admin import AdminClient

from cdc.log import Position, Record
from cdc.log.kafka import KafkaLog
from cdc.log.kafka.policies import POLICY_TOPIC

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
MAX_LAG = 5


def records(topic: str, first: int, count: int) -> list[Record]:
    return [Record(topic, orjson.dumps({"id": n}), orjson.dumps({"id": n}), Position(100 + n, 0))
            for n in range(first, first + count)]


class Member:
    """The group's member in its own process, told what to read through stdin."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.kafka_parity.blocking_member",
             bootstrap, topic, group, str(MAX_LAG)], cwd=ROOT, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)

    def read(self, count: int) -> int:
        """Have it read and commit ``count`` records; all it committed so far."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{count}\n")
        self.proc.stdin.flush()
        try:
            answer = self._lines.get(timeout=90)
        except queue.Empty:
            self.proc.kill()
            raise AssertionError(self.proc.communicate()[1]) from None
        return int(answer.split()[1])

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def test_a_block_group_in_another_process_holds_the_capture_back(kafka_bootstrap: str,
                                                                 unique_name: str) -> None:
    topic, group = f"{unique_name}.public.orders", f"{unique_name}-block"
    capture_log = KafkaLog([kafka_bootstrap], default_partitions=1)
    other_log = KafkaLog([kafka_bootstrap], default_partitions=1)
    member = Member(kafka_bootstrap, topic, group)
    try:
        capture_log.producer().append(records(topic, 0, 20))
        assert not capture_log.blocking_lag_exceeded(), "no group has read anything yet"
        assert member.read(4) == 4  # 16 behind: more than MAX_LAG
        assert capture_log.blocking_lag_exceeded(), "the policy came through Kafka"
        # a capture writing other topics of the cluster is not held back by this group
        other_log.producer().append(records(f"{unique_name}.public.other", 0, 1))
        assert not other_log.blocking_lag_exceeded()

        assert member.read(16) == 20  # caught up
        assert not capture_log.blocking_lag_exceeded()
        capture_log.producer().append(records(topic, 20, MAX_LAG))  # at the bound: not over
        assert not capture_log.blocking_lag_exceeded()
        capture_log.producer().append(records(topic, 20 + MAX_LAG, 1))
        assert capture_log.blocking_lag_exceeded()
    finally:
        member.stop()
        capture_log.close()
        other_log.close()
        # an idle group of a finished test must hold no later capture back
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        admin.delete_consumer_groups([group])[group].result(30)
    listing = KafkaLog([kafka_bootstrap])
    assert POLICY_TOPIC not in listing.admin().topics(), "hidden from cdc log topics"
    listing.close()
