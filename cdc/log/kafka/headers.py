"""How log records map onto Kafka messages: key and value as they are, the source
position and the tombstone flag in headers (``lsn``, ``seq``, ``del``)."""

from __future__ import annotations

from typing import Any

from ..records import NO_POSITION, Message, Position, Record


def record_headers(record: Record) -> list[tuple[str, str | bytes | None]]:
    """Headers carrying what the file backend keeps in its line."""
    headers: list[tuple[str, str | bytes | None]] = [
        ("lsn", b"%d" % record.position.commit_lsn), ("seq", b"%d" % record.position.seq)]
    if record.tombstone:
        headers.append(("del", b"1"))
    return headers


def to_message(kafka_message: Any) -> Message:
    """A ``confluent_kafka.Message`` as a log ``Message``."""
    headers = dict(kafka_message.headers() or ())
    lsn, seq = headers.get("lsn"), headers.get("seq")
    position = Position(int(lsn), int(seq or b"0")) if lsn is not None else NO_POSITION
    _, timestamp = kafka_message.timestamp()
    return Message(kafka_message.topic(), kafka_message.partition(), kafka_message.offset(),
                   timestamp, kafka_message.key() or b"", kafka_message.value() or b"",
                   position, headers.get("del") == b"1")
