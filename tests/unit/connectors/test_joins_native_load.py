"""The native snapshot reads of a joined view's initial load (``distributary_native.
join_loaded_rows``) against the Python path (the reference): a snapshot read's stored key
(``key_bytes``) and row (``orjson.dumps(after)``) byte for byte, for hypothesis-generated
events, and ``None`` (Python applies it) for any other event or where it must."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings

from cdc.native import CORE
from connectors.contract import SinkEvent
from connectors.joins.store import key_bytes

from .sink_events import sink_event
from .test_redis_native_rows import JSON_VALUES, KEY_SCALARS, events_of


def reference(item: SinkEvent) -> tuple[str, str, bytes, bytes] | None:
    """What the Python path stores of a snapshot read; None for other events."""
    event = item.event
    if event.get("op") != "r":
        return None
    source: dict[str, Any] = event["source"]
    return (source["schema"], source["table"], key_bytes(event["key"]),
            orjson.dumps(event["after"]))


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(events=events_of(KEY_SCALARS))
def test_snapshot_reads_are_stored_as_the_python_path_stores_them(
        events: list[SinkEvent]) -> None:
    native = CORE.join_loaded_rows(events)
    assert native == [reference(item) for item in events]


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(events=events_of(JSON_VALUES))
def test_any_key_is_stored_alike_or_left_to_python(events: list[SinkEvent]) -> None:
    for item, found in zip(events, CORE.join_loaded_rows(events), strict=True):
        assert found is None or found == reference(item)


def test_what_is_left_to_python() -> None:
    names = ("public", "orders")
    events = [sink_event(names, "r", {"id": 1}, {"id": 1, "v": "x"}, 1),
              sink_event(names, "c", {"id": 2}, {"id": 2}, 2),
              sink_event(names, "r", {"id": 1.5}, {"id": 1.5}, 3),  # a float key column
              sink_event(names, "r", {"id": 4}, {"id": 4}, 4, unchanged=("body",)),
              sink_event(names, "r", {"id": 2**64}, {"id": 5}, 5)]  # past 64 bits
    found = CORE.join_loaded_rows(events)
    assert found[0] == ("public", "orders", b'a{"id":1}', b'{"id":1,"v":"x"}')
    assert found[1:] == [None, None, None, None]
    assert CORE.join_loaded_rows([]) == []
