"""Which Kafka request failures are retried: a moment of leader change, not a refusal."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException

from cdc.log.kafka.retry import retrying


def failing(code: int, times: int) -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def request() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise KafkaException(KafkaError(code))
        return "answered"
    return calls, request


@pytest.mark.parametrize("code", [KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT,
                                  KafkaError.NOT_LEADER_FOR_PARTITION,
                                  KafkaError.OFFSET_NOT_AVAILABLE])
def test_a_request_to_a_broker_that_just_died_is_tried_again(code: int) -> None:
    calls, request = failing(code, times=2)
    assert retrying(request) == "answered"
    assert len(calls) == 3


def test_a_refusal_is_not_retried() -> None:
    calls, request = failing(KafkaError.TOPIC_AUTHORIZATION_FAILED, times=1)
    with pytest.raises(KafkaException):
        retrying(request)
    assert len(calls) == 1


def test_retrying_ends_after_its_time() -> None:
    calls, request = failing(KafkaError._DESTROY_BROKER, times=10**6)
    with pytest.raises(KafkaException):
        retrying(request, for_s=0.3)
    assert 2 <= len(calls) <= 6

