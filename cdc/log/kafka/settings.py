"""Client and topic settings of the Kafka backend, derived from ``log.max_record_bytes``.

A record of up to ``max_record_bytes`` (key, value and headers) must pass the producer
(``message.max.bytes``), the topic (``max.message.bytes``, set on every topic the capture
creates, so the broker's default of about 1 MB does not apply) and the consumers
(``fetch.max.bytes`` and ``receive.message.max.bytes``).
"""

from __future__ import annotations

from typing import Any

from ..limits import DEFAULT_MAX_RECORD_BYTES

FRAMING_BYTES = 64 * 1024
"""Room for the record batch header and protocol framing around one record."""

_FETCH_DEFAULT = 52_428_800  # librdkafka's fetch.max.bytes default


def message_bytes(max_record_bytes: int) -> int:
    """The ``max.message.bytes`` of a topic (and the producer's ``message.max.bytes``)."""
    return max_record_bytes + FRAMING_BYTES


def producer_config(max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> dict[str, Any]:
    """Idempotent, ``acks=all``, zstd, and a message size that fits the largest record."""
    return {"enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "compression.type": "zstd", "max.in.flight.requests.per.connection": 5,
            "message.max.bytes": message_bytes(max_record_bytes)}


def consumer_config(max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> dict[str, Any]:
    """Fetch sizes that let a consumer read the largest record."""
    fetch = max(_FETCH_DEFAULT, message_bytes(max_record_bytes))
    return {"fetch.max.bytes": fetch, "receive.message.max.bytes": fetch + FRAMING_BYTES}


HISTORY_CONFIG = {"retention.ms": "-1", "retention.bytes": "-1"}
"""What a history topic (``cdc.log.history``) is created with: kept forever."""


def topic_config(max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, *,
                 history: bool = False) -> dict[str, str]:
    """Settings of a topic the backend creates (``history``: one kept forever)."""
    config = {"max.message.bytes": str(message_bytes(max_record_bytes))}
    return {**config, **HISTORY_CONFIG} if history else config
