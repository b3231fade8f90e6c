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
                                  KafkaError.OFFSET_NOT_AVAILABLE,
                                  KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                  KafkaError.NOT_COORDINATOR])
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



def test_a_refusal_stays_the_reason_over_the_connection_errors_after_it() -> None:
    from cdc.log.kafka.producer import reason

    refused = KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: "
                         "Authentication failed during authentication due to invalid "
                         "credentials with SASL mechanism SCRAM-SHA-512")
    down = KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down")
    closed = KafkaError(KafkaError._TRANSPORT, "Disconnected")
    code, text = reason(None, None, closed)
    assert (code, text) == (KafkaError._TRANSPORT, "Kafka: Disconnected")
    code, text = reason(code, text, refused)  # the cause replaces a connection error
    assert code == KafkaError._AUTHENTICATION and text is not None
    assert "Authentication failed" in text
    assert reason(code, text, down) == (code, text)  # its consequence does not replace it
    assert reason(code, text, closed) == (code, text)
    certificate = KafkaError(KafkaError._SSL, "certificate verify failed")
    assert reason(code, text, certificate) == (KafkaError._SSL,
                                               "Kafka: certificate verify failed")
