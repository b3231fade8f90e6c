"""The records that carry a consumer group's backpressure policy on Kafka."""

from __future__ import annotations

import pytest

from cdc.log import Backpressure, BackpressurePolicy, Message, Record
from cdc.log.kafka.policies import POLICY_TOPIC, parse_policy, policy_record


def as_message(record: Record, offset: int = 0) -> Message:
    return Message(record.topic, 0, offset, 0, record.key, record.value, record.position,
                   record.tombstone)


def test_a_policy_record_reads_back_as_the_policy() -> None:
    policy = Backpressure(BackpressurePolicy.BLOCK, 1000)
    record = policy_record("search", policy)
    assert (record.topic, record.key, record.partition) == (POLICY_TOPIC, b"search", 0)
    assert parse_policy(as_message(record)) == policy
    assert parse_policy(as_message(policy_record("x", Backpressure()))) == Backpressure()


@pytest.mark.parametrize("value", [b"not json", b'{"policy": "later"}', b"[1]",
                                   b'{"policy": "block", "max_lag": "many"}'])
def test_an_unreadable_policy_is_skipped_with_a_warning(value: bytes,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    record = Record(POLICY_TOPIC, b"g", value)
    assert parse_policy(as_message(record, offset=7)) is None
    assert f"{POLICY_TOPIC}[0] offset 7" in caplog.text
