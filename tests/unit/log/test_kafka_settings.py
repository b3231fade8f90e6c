"""The Kafka backend's client settings follow ``log.max_record_bytes``; the error for a
record over it is one line naming topic, key, LSN, size and the setting."""

from __future__ import annotations

import pytest

from cdc.log import Position, Record
from cdc.log.history import keeps_history
from cdc.log.kafka.settings import (
    consumer_config,
    message_bytes,
    producer_config,
    topic_config,
)
from cdc.log.limits import RecordTooLargeError, record_size


def test_producer_is_idempotent_with_acks_all_and_zstd() -> None:
    config = producer_config(16 << 20)
    assert config["enable.idempotence"] is True and config["acks"] == "all"
    assert config["max.in.flight.requests.per.connection"] <= 5  # order kept on retries
    assert config["compression.type"] == "zstd"


@pytest.mark.parametrize("limit", [1 << 20, 16 << 20, 200 << 20])
def test_every_limit_fits_the_largest_record(limit: int) -> None:
    needed = message_bytes(limit)
    assert needed > limit
    assert producer_config(limit)["message.max.bytes"] == needed
    assert int(topic_config(limit)["max.message.bytes"]) == needed
    fetch = consumer_config(limit)
    assert fetch["fetch.max.bytes"] >= needed
    assert fetch["receive.message.max.bytes"] > fetch["fetch.max.bytes"]


def test_the_too_large_error_is_one_line_with_what_to_raise() -> None:
    record = Record("app.public.documents", b'{"id":42}', b"x" * 5000,
                    Position((1 << 32) + 0x16B37A0, 3))
    error = RecordTooLargeError(record, record_size(record), 4096)
    text = str(error)
    assert "\n" not in text
    for part in ("app.public.documents", '{"id":42}', "1/16B37A0", str(record_size(record)),
                 "4096", "log.max_record_bytes"):
        assert part in text, part
    long_key = RecordTooLargeError(record._replace(key=b"k" * 5000), 10_000, 4096)
    assert len(str(long_key)) < 800, "a huge key is shortened"


def test_history_topics_are_created_to_keep_their_records_forever() -> None:
    assert keeps_history("app._schemas") and keeps_history("app._snapshots")
    assert not keeps_history("app.public._schemas_of_mine") and not keeps_history("app._ddl")
    config = topic_config(history=True)
    assert config["retention.ms"] == "-1" and config["retention.bytes"] == "-1"
    assert "retention.ms" not in topic_config()


def test_bootstrap_servers_given_as_one_string_are_not_split_into_letters() -> None:
    from cdc.log.kafka import KafkaLog

    log = KafkaLog("127.0.0.1:1,127.0.0.1:2")  # nothing listens: no request is made
    try:
        assert log._config["bootstrap.servers"] == "127.0.0.1:1,127.0.0.1:2"
    finally:
        log.close()
