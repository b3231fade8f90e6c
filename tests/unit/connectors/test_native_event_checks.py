"""The native checks of a polled batch (``distributary_native.sink_event_checks``) against
the Python reference of ``decode_batch``: the same events (decoded on first use), versions,
dead letters and coalescing, for hypothesis-generated values, valid JSON or not."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.log import Message, Position
from cdc.native import CORE
from cdc.plugins.contract import Undecoded
from connectors.contract import SinkEvent, version_of
from connectors.runtime.events import decode_batch

JSON_SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text())
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=4),
                           max_leaves=12)


def dumped(value: Any, style: int) -> bytes:
    if style == 0:
        try:
            return orjson.dumps(value)
        except TypeError:  # an integer past 64 bits
            pass
    return json.dumps(value, ensure_ascii=style == 1, indent=2 if style == 2 else None
                      ).encode()


def mangled(raw: bytes, cut: int, junk: bytes) -> bytes:
    """A value broken somewhere: cut short, something put in, or left alone."""
    at = cut % (len(raw) + 1)
    return raw[:at] + junk + raw[at:] if junk else raw[:at]


VALUES = st.one_of(
    st.builds(dumped, st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=5),
              st.integers(0, 3)),
    st.builds(dumped, JSON_VALUES, st.integers(0, 3)),
    st.builds(mangled, st.builds(dumped, st.dictionaries(st.text(max_size=3), JSON_VALUES,
                                                         max_size=3), st.integers(0, 3)),
              st.integers(0, 1000), st.sampled_from([b"", b"\x00", b"\xff", b",", b"}",
                                                     b"\\", b'"', b"\\ud800", b"1e999"])),
    st.binary(max_size=40))


def message(number: int, key: int, value: bytes, lsn: int, seq: int) -> Message:
    return Message("app.public.t", 0, number, 0, b'{"id":%d}' % key, value,
                   Position(lsn, seq), False)


def same(native: list[SinkEvent], reference: list[SinkEvent]) -> None:
    assert [(e.message, e.version) for e in native] == [
        (e.message, e.version) for e in reference]
    assert [e.event for e in native] == [e.event for e in reference]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(values=st.lists(st.tuples(VALUES, st.integers(0, 3), st.integers(0, 2**53),
                                 st.integers(0, 5000)), max_size=12))
def test_generated_batches_decode_as_the_reference_does(
        values: list[tuple[bytes, int, int, int]]) -> None:
    messages = [message(n, key, raw, lsn, seq) for n, (raw, key, lsn, seq) in enumerate(values)]
    native, reference = decode_batch(messages), decode_batch(messages, native=False)
    same(native.events, reference.events)
    assert native.undecodable == reference.undecodable


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(raw=VALUES)
def test_a_value_vouched_for_is_a_json_object_orjson_decodes(raw: bytes) -> None:
    checked = CORE.sink_event_checks([message(0, 0, raw, 1, 0)])
    assert checked is not None
    if checked[1] == []:
        assert isinstance(orjson.loads(raw), dict)


def test_plain_events_are_left_undecoded_and_versions_match() -> None:
    raws = [b'{"op":"u","key":{"id":1},"after":{"id":1}}', b"[1]", b"not json",
            b'{"op":"d","key":{"id":2}}', b'{"a":' + b"[" * 80 + b"]" * 80 + b"}"]
    messages = [message(n, n, raw, 0x16B3700 + n, n * 600) for n, raw in enumerate(raws)]
    decoded = decode_batch(messages)
    assert [e.message.offset for e in decoded.events] == [0, 3, 4]
    held = [tuple.__getitem__(e, 1) for e in decoded.events]
    assert [type(h) for h in held] == [Undecoded, Undecoded, dict]  # too deep: decoded
    assert [e.version for e in decoded.events] == [
        version_of(0x16B3700 + n, n * 600) for n in (0, 3, 4)]
    assert [m.offset for m, _ in decoded.undecodable] == [1, 2]
    assert decoded.undecodable[0][1] == "the value is a JSON list, not an object"
    assert decoded.undecodable == decode_batch(messages, native=False).undecodable
    assert decoded.events[0].event == {"op": "u", "key": {"id": 1}, "after": {"id": 1}}
    assert decoded.events[0] == SinkEvent(messages[0], orjson.loads(raws[0]),
                                          decoded.events[0].version)


def test_a_version_past_64_bits_is_left_to_python() -> None:
    huge = message(0, 0, b"{}", 1 << 60, 0)
    assert CORE.sink_event_checks([huge]) is None
    assert decode_batch([huge]).events[0].version == version_of(1 << 60, 0)
