"""Retrying a metadata-level request while Kafka says it is worth retrying (a new
topic's partitions answer NOT_LEADER_FOR_PARTITION for a moment after creation; a
request queued for a broker that just died fails with _DESTROY_BROKER or _TRANSPORT
until the client has the partition's new leader; a partition's new leader answers
OFFSET_NOT_AVAILABLE for its offsets until its high watermark has caught up; a group's
coordinator answers COORDINATOR_LOAD_IN_PROGRESS while it loads the group offsets' partition,
on a new cluster or after a failover, and NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE until
the client has found its new one)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

T = TypeVar("T")

RETRY_FOR_S = 30.0
_SETTLING = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                       KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._DESTROY_BROKER,
                       KafkaError._TRANSPORT, KafkaError.OFFSET_NOT_AVAILABLE,
                       KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                       KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR})


def retrying(request: Callable[[], T], *, for_s: float = RETRY_FOR_S) -> T:
    """``request()``, tried again every 0.1 s while it fails with a retriable error."""
    deadline = time.monotonic() + for_s
    while True:
        try:
            return request()
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            retriable = isinstance(error, KafkaError) and (
                error.retriable() or error.code() in _SETTLING)
            if not retriable or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
