"""From log messages to sink events: decoding, coalescing per key, commit offsets.

A polled batch is checked in one native call (``sink_event_checks``: each message's
version, and whether its value is certainly a JSON object orjson decodes) and its events
are made undecoded (``SinkEvent.undecoded``): the first reader of ``SinkEvent.event``
decodes one, and a sink that works from the raw values (Redis's native rows) never does.
Values the check is unsure of are decoded here (``decode_event``) and go to the
dead-letter topic when they are not JSON objects. ``coalesce`` decodes only events whose
key comes again in the batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import orjson

from cdc.log import Message, TopicPartition
from cdc.native import CORE
from cdc.plugins.contract import Undecoded
from connectors.contract import SinkEvent, version_of
from derived import fill_unchanged


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
    """The last event of each key (same topic and key bytes), in log order of those.

    A kept event whose ``unchanged`` (TOAST) columns were sent in full by a dropped
    earlier event of the same key gets those values back (``derived.fill_unchanged``),
    so nothing is lost by dropping; its ``before`` is left to ``connectors.changes``.
    """
    last: dict[tuple[str, bytes], int] = {}
    for index, sink_event in enumerate(events):
        last[(sink_event.message.topic, sink_event.message.key)] = index
    if len(last) == len(events):
        return list(events)
    known: dict[tuple[str, bytes], dict[str, object]] = {}
    for index, sink_event in enumerate(events):
        where = (sink_event.message.topic, sink_event.message.key)
        if last[where] == index and where not in known:
            continue  # the one event of its key, or nothing earlier to keep: not decoded
        after = sink_event.event.get("after")
        if sink_event.event.get("op") in ("d", "t") or not isinstance(after, dict):
            known.pop(where, None)
            continue
        if last[where] != index:
            merged = known.setdefault(where, {})
            merged.update(fill_unchanged(after, sink_event.event.get("unchanged"), merged).row)
    kept = []
    for index in sorted(last.values()):
        sink_event = events[index]
        where = (sink_event.message.topic, sink_event.message.key)
        kept.append(_filled_from_earlier(sink_event, known.get(where)))
    return kept


def _filled_from_earlier(sink_event: SinkEvent, earlier: dict[str, object] | None) -> SinkEvent:
    if not earlier:
        return sink_event
    unchanged = sink_event.event.get("unchanged")
    after = sink_event.event.get("after")
    if not unchanged or not isinstance(after, dict):
        return sink_event
    filled = fill_unchanged(after, unchanged, earlier)
    if filled.missing == frozenset(unchanged):
        return sink_event
    event = dict(sink_event.event)
    event["after"] = filled.row
    event["unchanged"] = [name for name in unchanged if name in filled.missing]
    return SinkEvent(sink_event.message, event, sink_event.version)


def next_offsets(messages: Iterable[Message]) -> dict[TopicPartition, int]:
    """The offset to commit per partition after ``messages``: past the highest offset
    of each (a consumer's batch holds a partition's messages in offset order, but the
    highest is taken anyway)."""
    highest: dict[tuple[str, int], int] = {}
    for message in messages:
        where = (message.topic, message.partition)
        if message.offset >= highest.get(where, -1):
            highest[where] = message.offset
    return {TopicPartition(topic, partition): offset + 1
            for (topic, partition), offset in highest.items()}


@dataclass(slots=True)
class DecodedBatch:
    """A polled batch: coalesced events for the sink, and messages that failed decoding."""

    events: list[SinkEvent] = field(default_factory=list)
    undecodable: list[tuple[Message, str]] = field(default_factory=list)


def decode_batch(messages: Sequence[Message], *, native: bool = True,
                 coalesced: bool = True) -> DecodedBatch:
    """Decode every message (left undecoded where the native checks vouch for it;
    ``native=False``: the Python reference only), then coalesce per key (unless
    ``coalesced`` is false: joined views apply every event, a key change's delete too)."""
    keep = coalesce if coalesced else list
    batch = DecodedBatch()
    listed = messages if isinstance(messages, list) else list(messages)
    checked = CORE.sink_event_checks(listed) if native else None
    if checked is None:
        decoded: list[SinkEvent] = []
        for message in listed:
            try:
                decoded.append(decode_event(message))
            except EventDecodeError as exc:
                batch.undecodable.append((message, str(exc)))
        batch.events = keep(decoded)
        return batch
    versions, doubtful = checked
    events = [SinkEvent(message, Undecoded(), version)
              for message, version in zip(listed, versions, strict=True)]
    if doubtful:
        bad: set[int] = set()
        for index in doubtful:
            try:
                events[index] = decode_event(listed[index])
            except EventDecodeError as exc:
                batch.undecodable.append((listed[index], str(exc)))
                bad.add(index)
        if bad:
            events = [event for index, event in enumerate(events) if index not in bad]
    batch.events = keep(events)
    return batch
