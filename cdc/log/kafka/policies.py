"""Backpressure policies of consumer groups, shared across processes through Kafka.

A connector and the capture may run in different processes (or machines), so a group's
policy lives where both see it: the compacted topic ``__distributary_group_policies``
(one partition; key: the group's name, value: ``{"policy": "block", "max_lag": 1000}``).
A member writes its group's policy when it joins; the capture reads the topic forward
from where it stopped, so a check costs one offsets request when nothing changed.
The ``__`` prefix keeps the topic out of ``cdc log topics`` and of topic patterns.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import orjson

from cdc.errors import LogError

from ..records import Backpressure, BackpressurePolicy, Message, Record
from .admin import KafkaAdmin
from .producer import KafkaProducer
from .reading import _read_from, _reader, watermarks

log = logging.getLogger(__name__)

POLICY_TOPIC = "__distributary_group_policies"


def policy_record(group: str, backpressure: Backpressure) -> Record:
    """The record saying ``group`` follows ``backpressure``."""
    value = {"policy": backpressure.policy.value, "max_lag": backpressure.max_lag}
    return Record(POLICY_TOPIC, group.encode(), orjson.dumps(value), partition=0)


def parse_policy(message: Message) -> Backpressure | None:
    """The policy a record holds; None for a record this version cannot read."""
    try:
        data = orjson.loads(message.value)
        return Backpressure(BackpressurePolicy(data["policy"]), int(data["max_lag"]))
    except (orjson.JSONDecodeError, TypeError, ValueError, KeyError):
        log.warning("ignoring an unreadable group policy at %s[%d] offset %d",
                    message.topic, message.partition, message.offset)
        return None


class GroupPolicies:
    """Publishes this process's groups' policies; reads every group's current one
    (thread-safe: connector workers join from their own threads)."""

    def __init__(self, config: dict[str, Any], admin: KafkaAdmin) -> None:
        self._config = config
        self._admin = admin
        self._producer: KafkaProducer | None = None
        self._reader: Any = None
        self._next = 0
        self._known: dict[str, Backpressure] = {}
        self._lock = threading.Lock()

    def publish(self, group: str, backpressure: Backpressure) -> None:
        """Record ``group``'s policy durably (acks=all) before its member starts reading."""
        with self._lock:
            self._publish(group, backpressure)

    def _publish(self, group: str, backpressure: Backpressure) -> None:
        try:
            self._admin.create_compacted_topic(POLICY_TOPIC)
            if self._producer is None:
                self._producer = KafkaProducer(self._config, self._admin)
            self._producer.append([policy_record(group, backpressure)])
        except LogError as exc:
            if backpressure.policy is BackpressurePolicy.BLOCK:
                raise LogError(f"cannot record the block policy of group {group!r} in "
                               f"topic {POLICY_TOPIC} (the capture reads it there): "
                               f"{exc}") from exc
            log.warning("cannot record the policy of group %s: %s", group, exc,
                        extra={"group": group})
            return
        self._known[group] = backpressure

    def current(self) -> dict[str, Backpressure]:
        """Every group's latest policy, reading what was written since the last call."""
        with self._lock:
            return self._read_forward()

    def _read_forward(self) -> dict[str, Backpressure]:
        if self._reader is None:
            self._reader = _reader(self._config)
        marks = watermarks(self._reader, POLICY_TOPIC)
        if not marks:
            return dict(self._known)
        low, high = marks[0]
        if high < self._next:  # the topic was recreated: read it again
            self._next, self._known = 0, {}
        start = max(low, self._next)
        for message in _read_from(self._reader, POLICY_TOPIC, {0: start}, {0: high}):
            policy = parse_policy(message)
            if policy is not None:
                self._known[message.key.decode("utf-8", "replace")] = policy
        self._next = max(self._next, high)
        return dict(self._known)

    def close(self) -> None:
        """Close the clients."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._producer is not None:
            self._producer.close()
            self._producer = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None
