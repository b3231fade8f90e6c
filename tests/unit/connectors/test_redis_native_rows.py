"""The native plain rows (``distributary_native.redis_calls``) against the Python loop of
``PlainRows`` (the reference): the same script calls, byte for byte as redis-py packs the
reference's arguments, for hypothesis-generated events, and ``None`` (Python decides)
where it must."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.connection import Connection

from cdc.log import Message
from connectors.contract import SinkEvent
from connectors.redis import RedisSinkConfig
from connectors.redis.batch import CHUNK_BYTES, CHUNK_ROWS, PackedBatch, RowBatch, ScriptBatch
from connectors.redis.keys import KeyTemplates
from connectors.redis.native_rows import NativeRows
from connectors.redis.plain import PlainRows

from .sink_events import compact, sink_event

TTLS = (0, 0, 604_800_000)
TEMPLATES = ["{table}:{key}", "{schema}.{table}:{key}", "{prefix}/{key.id}:{key.b}", "{key}",
             "x{topic}y{key.id}z{key}"]
SHA = "0123456789abcdef0123456789abcdef01234567"


def calls(rows: RowBatch | PackedBatch | None) -> list[bytes] | None:
    """Each call's EVALSHA command as sent: the native batch's packed bytes, or redis-py's
    packing of the reference's keys and arguments."""
    assert rows is None or isinstance(rows, ScriptBatch | PackedBatch)
    if rows is None:
        return None
    if isinstance(rows, PackedBatch):
        return [b"".join(parts) for parts in rows.commands(SHA)]
    packer = Connection()  # type: ignore[no-untyped-call]
    return [b"".join(packer.pack_command(  # type: ignore[no-untyped-call]
        "EVALSHA", SHA, len(keys), *keys, *args)) for keys, args in rows.calls()]


def both(events: list[SinkEvent], template: str = "{table}:{key}", *,
         chunk_rows: int = CHUNK_ROWS, chunk_bytes: int = CHUNK_BYTES,
         **settings_: Any) -> tuple[Any, Any]:
    config = RedisSinkConfig.model_validate({"url": "redis://h:6379/0",
                                             "key_template": template, **settings_})
    reference = PlainRows(config, KeyTemplates(template), "app", native=False,
                          chunk_rows=chunk_rows, chunk_bytes=chunk_bytes)
    viewed = {view.table for view in config.views}
    native = NativeRows(KeyTemplates(template), viewed, "app", config.max_value_bytes,
                        chunk_rows=chunk_rows, chunk_bytes=chunk_bytes)
    return calls(native.rows(events, TTLS)), calls(reference.rows(events, TTLS))


def test_the_event_fields_are_where_the_native_side_reads_them() -> None:
    assert SinkEvent._fields.index("message") == 0 and SinkEvent._fields.index("version") == 2
    assert Message._fields.index("topic") == 0 and Message._fields.index("value") == 5


def test_a_batch_of_two_tables_gives_the_same_calls() -> None:
    orders, lines = ("public", "orders"), ("s", "lines")
    events = [sink_event(orders, "c", {"id": 1}, {"id": 1, "n": 2**62, "t": "é\n\"", "f": 1.5,
                                                  "j": {"a": [1, None, True]}}, 1),
              sink_event(lines, "u", {"id": "a:b", "b": 1}, {"id": "a:b", "b": 1}, 2),
              sink_event(orders, "d", {"id": 2}, None, 3),
              sink_event(lines, "r", {"id": None, "b": False}, {"x": []}, 4)]
    for template in TEMPLATES:
        native, reference = both(events, template)
        assert native is not None
        assert native == reference


def test_escaped_and_spaced_json_is_read_as_orjson_reads_it() -> None:
    def spaced(body: Any) -> str:
        return json.dumps(body, indent=1, ensure_ascii=True)

    events = [sink_event(("public", "orders"), "u", {"id": "\u00e9\U0001f600/\\"},
                         {"id": "\u00e9\U0001f600", "c": "\x1b\x7f\u2028", "e": 1e-7,
                          "big": 2**64, "neg": -(2**63) - 1}, 1, dumps=spaced)]
    native, reference = both(events)
    assert native is not None
    assert native == reference


@pytest.mark.parametrize(("op", "key", "after", "unchanged"), [
    ("u", {"id": 1.5}, {"id": 1}, ()),              # a float key column: Python's repr
    ("u", {"id": 2**64}, {"id": 1}, ()),            # an int orjson reads as a float
    ("u", {"id": {"a": 1}}, {"id": 1}, ()),         # a JSON key column
    ("u", {}, {"id": 1}, ()),                       # no key: not plain
    ("u", {"id": 1}, {"id": 1}, ("body",)),         # unchanged TOAST columns: not plain
    ("u", {"id": 1}, {"id": 1}, "x"),               # an odd unchanged: Python decides
    ("u", {"id": 1}, [1], ()),                      # after is not an object
    ("t", {"id": 1}, None, ()),                     # a truncate
])
def test_what_the_native_side_leaves_to_python(op: str, key: dict[str, Any], after: Any,
                                                unchanged: Any) -> None:
    events = [sink_event(("public", "orders"), "u", {"id": 9}, {"id": 9}, 1),
              sink_event(("public", "orders"), op, key, after, 2, unchanged=unchanged)]
    native, _ = both(events)
    assert native is None


def test_duplicate_members_and_other_odd_json_are_left_to_python() -> None:
    good = sink_event(("public", "orders"), "u", {"id": 9}, {"id": 9}, 1)
    for raw in [b'{"op":"u","op":"u","key":{"id":1},"after":{},"source":{"schema":"public",'
                b'"table":"orders"}}',
                b'{"op":"u","key":{"id":1},"after":{"a":1,"a":2},"source":{"schema":"public",'
                b'"table":"orders"}}',
                b'{"op":"u","key":{"id":1},"after":{},"source":{"schema":null,"table":"o"}}']:
        odd = good._replace(message=good.message._replace(value=raw), event=orjson.loads(raw))
        native, _ = both([good, odd])
        assert native is None


@pytest.mark.parametrize("settings_", [
    {"views": [{"source": "public.orders", "target": "orders", "fields": ["id"]}]},
    {"max_value_bytes": 10}])
def test_a_viewed_table_or_a_large_value_is_left_to_python(settings_: dict[str, Any]) -> None:
    events = [sink_event(("public", "orders"), "u", {"id": 1}, {"id": 1, "t": "long text"}, 1)]
    native, reference = both(events, **settings_)
    assert native is None and reference is None


def test_calls_are_cut_as_the_python_batch_cuts_them() -> None:
    events = [sink_event(("public", "orders"), "d" if n % 4 == 3 else "u", {"id": n},
                         {"id": n, "pad": "x" * (n % 7)}, n) for n in range(20)]
    native, reference = both(events, chunk_rows=3, chunk_bytes=40)
    assert native is not None and len(native) > 20 // 3
    assert native == reference


def shortest_is_a_tie(value: float) -> bool:
    """True when a decimal as short as ``repr(value)`` on its other side is just as close
    and reads back too: Python's ``repr`` takes the even last digit, Rust may not, so the
    native renderer leaves the batch to Python (``test_a_tied_float_is_left_to_python``)."""
    shortest = Decimal(repr(abs(value)))
    unit = Decimal(1).scaleb(shortest.as_tuple().exponent)  # type: ignore[arg-type]
    exact = Decimal(abs(value))
    return any(exact == shortest + side * unit / 2 and float(shortest + side * unit) == abs(value)
               for side in (1, -1))


def test_a_tied_float_is_left_to_python() -> None:
    assert shortest_is_a_tie(562949953421312.2) and not shortest_is_a_tie(0.1)
    events = [sink_event(("public", "orders"), "u", {"id": 1},
                         {"id": 1, "x": 562949953421312.2}, 1)]
    native, reference = both(events)
    assert native is None and reference is not None


JSON_SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
                | st.floats(allow_nan=False, allow_infinity=False).filter(
                    lambda value: not shortest_is_a_tie(value))
                | st.text())
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=4),
                           max_leaves=12)
KEY_SCALARS = (st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
               | st.text(alphabet=st.characters(codec="utf-8"), max_size=6))
TABLES = st.sampled_from([("public", "orders"), ("s", "li:nes"), ("é", "t*[x]")])


@st.composite
def events_of(draw: st.DrawFn, key_values: st.SearchStrategy[Any]) -> list[SinkEvent]:
    count = draw(st.integers(1, 12))
    made = []
    for number in range(count):
        names = draw(st.lists(st.sampled_from(["id", "b", "c:d", "\\"]), min_size=1,
                              max_size=3, unique=True))
        key = {name: draw(key_values) for name in names}
        op = draw(st.sampled_from(["c", "u", "r", "d"]))
        after = draw(st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=6))
        dumps = draw(st.sampled_from([compact, json.dumps,
                                      lambda b: json.dumps(b, ensure_ascii=False, indent=2)]))
        made.append(sink_event(draw(TABLES), op, key, {**after, **key}, number, dumps=dumps))
    return made


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(events=events_of(KEY_SCALARS), template=st.sampled_from(TEMPLATES))
def test_generated_plain_batches_give_identical_arguments(events: list[SinkEvent],
                                                          template: str) -> None:
    native, reference = both(events, template)
    assert reference is not None
    assert native == reference


@settings(max_examples=75, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(events=events_of(JSON_VALUES), template=st.sampled_from(TEMPLATES))
def test_any_key_gives_identical_arguments_or_python_decides(events: list[SinkEvent],
                                                             template: str) -> None:
    native, reference = both(events, template)
    assert native is None or native == reference


def test_a_key_the_call_holds_already_starts_a_new_call_on_both_sides() -> None:
    orders = ("public", "orders")
    events = [sink_event(orders, "u", {"id": n % 3}, {"id": n % 3, "n": n}, n)
              for n in range(7)]
    for template in ("{key}", "x{topic}y{key.id}z{key}"):
        native, reference = both(events, template)
        assert native is not None and len(native) == 3  # ids 0,1,2 | 0,1,2 | 0
        assert native == reference
    native, reference = both(events, "same")  # every event writes one key
    assert native is not None and len(native) == 7
    assert native == reference
