"""From log messages to sink events: decoding, coalescing per key, commit offsets."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import orjson

from cdc.log import Message, TopicPartition
from connectors.contract import SinkEvent, version_of


class EventDecodeError(ValueError):
    """A message value that is not a JSON object (it goes to the dead-letter topic)."""


def decode_event(message: Message) -> SinkEvent:
    """The sink's view of ``message``: its JSON value and ``version_of(position)``."""
    try:
        event = orjson.loads(message.value)
    except orjson.JSONDecodeError as exc:
        raise EventDecodeError(f"the value is not JSON: {exc}") from None
    if not isinstance(event, dict):
        raise EventDecodeError(f"the value is a JSON {type(event).__name__}, not an object")
    position = message.position
    return SinkEvent(message, event, version_of(position.commit_lsn, position.seq))


def coalesce(events: Sequence[SinkEvent]) -> list[SinkEvent]:
    """The last event of each key (same topic and key bytes), in log order of those."""
    last: dict[tuple[str, bytes], int] = {}
    for index, sink_event in enumerate(events):
        last[(sink_event.message.topic, sink_event.message.key)] = index
    if len(last) == len(events):
        return list(events)
    return [events[i] for i in sorted(last.values())]


def next_offsets(messages: Iterable[Message]) -> dict[TopicPartition, int]:
    """The offset to commit per partition after ``messages``."""
    offsets: dict[TopicPartition, int] = {}
    for message in messages:
        tp = TopicPartition(message.topic, message.partition)
        offsets[tp] = max(offsets.get(tp, 0), message.offset + 1)
    return offsets


@dataclass(slots=True)
class DecodedBatch:
    """A polled batch: coalesced events for the sink, and messages that failed decoding."""

    events: list[SinkEvent] = field(default_factory=list)
    undecodable: list[tuple[Message, str]] = field(default_factory=list)


def decode_batch(messages: Sequence[Message]) -> DecodedBatch:
    """Decode every message, then coalesce per key."""
    batch = DecodedBatch()
    decoded: list[SinkEvent] = []
    for message in messages:
        try:
            decoded.append(decode_event(message))
        except EventDecodeError as exc:
            batch.undecodable.append((message, str(exc)))
    batch.events = coalesce(decoded)
    return batch
