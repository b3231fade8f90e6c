"""Decoding messages into sink events, coalescing per key, commit offsets."""

from __future__ import annotations

import orjson
import pytest

from cdc.log import Message, Position, TopicPartition
from connectors.contract import version_of
from connectors.runtime import coalesce, decode_event
from connectors.runtime.events import EventDecodeError, decode_batch, next_offsets


def message(key: int, offset: int, *, partition: int = 0, topic: str = "t",
            value: bytes | None = None, lsn: int = 0, seq: int = 0) -> Message:
    body = value if value is not None else orjson.dumps({"op": "u", "key": {"id": key},
                                                         "offset": offset})
    return Message(topic, partition, offset, 0, orjson.dumps({"id": key}), body,
                   Position(lsn or 1000 + offset, seq), False)


def test_decode_carries_the_version_of_the_position() -> None:
    event = decode_event(message(7, 3, lsn=0x16B37A0, seq=5))
    assert event.version == version_of(0x16B37A0, 5) == (0x16B37A0 << 10) | 5
    assert event.op == "u" and event.key == {"id": 7}


@pytest.mark.parametrize(("value", "reason"), [(b"{not json", "not JSON"),
                                               (b"[1, 2]", "a JSON list, not an object")])
def test_decode_refuses_what_is_not_an_event(value: bytes, reason: str) -> None:
    with pytest.raises(EventDecodeError, match=reason):
        decode_event(message(1, 0, value=value))


def test_coalesce_keeps_the_last_event_per_key_in_log_order() -> None:
    events = [decode_event(m) for m in [message(1, 0), message(2, 1), message(1, 2),
                                        message(3, 3), message(2, 4), message(1, 5)]]
    kept = coalesce(events)
    assert [(e.key["id"], e.message.offset) for e in kept] == [(3, 3), (2, 4), (1, 5)]


def test_coalesce_tells_topics_apart() -> None:
    events = [decode_event(message(1, 0, topic="a")), decode_event(message(1, 0, topic="b"))]
    assert coalesce(events) == events


def test_decode_batch_keeps_undecodable_messages_apart() -> None:
    batch = decode_batch([message(1, 0), message(2, 1, value=b"\xff"), message(1, 2)])
    assert [e.message.offset for e in batch.events] == [2]
    assert [(m.offset, reason.split(":")[0]) for m, reason in batch.undecodable] == [
        (1, "the value is not JSON")]


def test_next_offsets_follow_every_polled_message() -> None:
    offsets = next_offsets([message(1, 4), message(2, 9, partition=1), message(3, 5)])
    assert offsets == {TopicPartition("t", 0): 6, TopicPartition("t", 1): 10}


def test_coalescing_keeps_toast_values_sent_by_dropped_events() -> None:
    from cdc.log import Message, Position
    from connectors.contract import SinkEvent
    from connectors.runtime.events import coalesce

    def event(offset: int, after: dict[str, object], unchanged: list[str]) -> SinkEvent:
        message = Message("p.public.docs", 0, offset, 0, b'{"id":1}', b"{}",
                          Position(100 + offset, 0), False)
        return SinkEvent(message, {"op": "u", "key": {"id": 1}, "after": after,
                                   "unchanged": unchanged}, offset)

    first = event(1, {"id": 1, "title": "a", "body": "long text"}, [])
    second = event(2, {"id": 1, "title": "b"}, ["body"])
    (kept,) = coalesce([first, second])
    assert kept.event["after"] == {"id": 1, "title": "b", "body": "long text"}
    assert kept.event["unchanged"] == []
    assert kept.version == 2
