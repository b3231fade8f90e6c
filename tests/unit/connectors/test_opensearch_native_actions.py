"""The native bulk actions (``distributary_native.opensearch_actions``) against the
Python path's (the reference): the same action bytes per event (``index_action`` /
``delete_action`` of ``encode_key(key)`` and ``after``) and the same kinds of values per
field, and of every value by its path, for hypothesis-generated events; ``None`` (Python
decides) where it must. And the unindexed-values shortcuts (``vouched``, ``deep_vouched``)
only vouch for documents the full check passes.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.log import Message
from connectors.contract import SinkEvent
from connectors.opensearch.bulk import delete_action, index_action
from connectors.opensearch.native_actions import (
    KIND_BIG_INT,
    KIND_FLOAT,
    KIND_INFINITE_TEXT,
    KIND_INT,
    KIND_NULL,
    KIND_OBJECT,
    KIND_STR,
    NativeActions,
    NativeBatch,
    deep_vouched,
    vouched,
)
from connectors.opensearch.unindexed import _unindexed_quickly, always_fitting, unindexed_fields
from connectors.placeholders import TableNames
from derived import encode_key
from tests.reference.field_kinds import deep_kinds_of, kind_of

from .sink_events import compact, sink_event
from .test_opensearch_fast_paths import JOINED, JOINED_VALUES, MAPPINGS, VALUES

MAX_ID_BYTES = 512


def alias_of(names: TableNames) -> str:
    return f"{names.schema}-{names.table}".lower()


def native(events: list[SinkEvent], viewed: frozenset[tuple[str, str]] = frozenset()
           ) -> NativeBatch | None:
    return NativeActions(set(viewed), "app", MAX_ID_BYTES).render(events, alias_of)


def reference(events: list[SinkEvent]) -> tuple[list[bytes], list[str], dict[str, dict[str, int]]]:
    """What the Python path writes for a plain batch: each event's action, and per alias
    the kinds of its documents' fields."""
    payloads, kinds = [], []
    fields: dict[str, dict[str, int]] = {}
    for item in events:
        event = item.event
        names = TableNames.of(item.message.topic, event["source"], "app")
        alias, doc_id = alias_of(names), encode_key(event["key"])
        if event["op"] == "d":
            action = delete_action(item, alias, doc_id)
        else:
            action = index_action(item, alias, doc_id, event["after"])
            table = fields.setdefault(alias, {})
            for name, value in event["after"].items():
                table[name] = table.get(name, 0) | kind_of(value)
        payloads.append(action.payload)
        kinds.append(action.kind)
    return payloads, kinds, fields


def assert_same(rendered: NativeBatch | None, events: list[SinkEvent]) -> None:
    assert rendered is not None
    payloads, kinds, fields = reference(events)
    assert rendered.payloads == payloads
    assert rendered.kinds == kinds
    aliases = [alias_of(names) for names in rendered.tables]
    assert [aliases[number] for number in rendered.table_of] == [
        alias_of(TableNames.of(e.message.topic, e.event["source"], "app")) for e in events]
    merged: dict[str, dict[str, int]] = {}
    for alias, kinds_of_table in zip(aliases, rendered.fields, strict=True):
        for name, bits in kinds_of_table.items():
            merged.setdefault(alias, {})[name] = merged.get(alias, {}).get(name, 0) | bits
    assert {alias: kinds for alias, kinds in merged.items() if kinds} == fields
    for alias, deep in zip(aliases, rendered.deep, strict=True):
        documents = [e.event["after"] for e in events if e.event["op"] != "d"
                     and alias_of(TableNames.of(e.message.topic, e.event["source"], "app"))
                     == alias]
        if deep is None:  # only a name inside a value that JSON escapes, or deep nesting
            assert any(_escaped_name_below(document) for document in documents), documents
            continue
        want: dict[str, int] = {}
        for document in documents:
            for path, bits in deep_kinds_of(document).items():
                want[path] = want.get(path, 0) | bits
        assert deep == want


def _escaped_name_below(value: Any, depth: int = 0) -> bool:
    """True when a dict inside ``value`` (not ``value`` itself) has a name JSON escapes."""
    if isinstance(value, list):
        return any(_escaped_name_below(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return any((depth > 0 and any(c in '"\\' or c < " " for c in name))
                   or _escaped_name_below(item, depth + 1) for name, item in value.items())
    return False


def test_the_event_fields_are_where_the_native_side_reads_them() -> None:
    assert SinkEvent._fields.index("message") == 0 and SinkEvent._fields.index("version") == 2
    assert Message._fields.index("topic") == 0 and Message._fields.index("value") == 5


def test_a_batch_of_two_tables_gives_the_same_actions() -> None:
    orders, lines = ("public", "orders"), ("s", "lines")
    events = [sink_event(orders, "c", {"id": 1}, {"id": 1, "n": 2**62, "t": "é\n\"", "f": 1.5,
                                                  "j": {"a": [1, None, True]}}, 1),
              sink_event(lines, "u", {"id": "a:b", "b": 1}, {"id": "a:b", "b": 1, "x": None}, 2),
              sink_event(orders, "d", {"id": 2}, None, 3),
              sink_event(lines, "r", {"id": None, "b": False}, {"big": 2**64 - 1, "l": []}, 4),
              sink_event(orders, "u", {"id": 3}, {"id": 3, "n": "x"}, 5)]
    rendered = native(events)
    assert_same(rendered, events)
    assert rendered is not None
    assert rendered.fields[0] == {"id": KIND_INT, "n": KIND_INT | KIND_STR, "t": KIND_STR,
                                  "f": KIND_FLOAT, "j": KIND_OBJECT}
    assert rendered.fields[1]["big"] == KIND_BIG_INT and rendered.fields[1]["x"] == KIND_NULL


def test_escaped_and_spaced_json_is_read_as_orjson_reads_it() -> None:
    def spaced(body: Any) -> str:
        return json.dumps(body, indent=1, ensure_ascii=True)

    events = [sink_event(("public", "orders"), "u", {"id": "\u00e9\U0001f600/\\"},
                         {"id": "\u00e9\U0001f600", "c": "\x1b\x7f\u2028", "e": 1e-7,
                          "big": 2**64, "neg": -(2**63) - 1}, 1, dumps=spaced)]
    assert_same(native(events), events)


@pytest.mark.parametrize(("op", "key", "after", "unchanged"), [
    ("u", {"id": 1.5}, {"id": 1}, ()),              # a float key column: Python's repr
    ("u", {"id": {"a": 1}}, {"id": 1}, ()),         # a JSON key column
    ("u", {}, {"id": 1}, ()),                       # no key: rejected by Python
    ("u", {"id": "x" * 513}, {"id": 1}, ()),        # an id past OpenSearch's limit
    ("u", {"id": 1}, {"id": 1}, ("body",)),         # unchanged TOAST columns
    ("u", {"id": 1}, [1], ()),                      # after is not an object
    ("u", {"id": 1}, {'a"b': 1}, ()),               # a field name with an escape
    ("t", {"id": 1}, None, ()),                     # a truncate
    ("m", {"id": 1}, None, ()),                     # a logical message
    ("x", {"id": 1}, None, ()),                     # an unknown op
])
def test_what_the_native_side_leaves_to_python(op: str, key: dict[str, Any], after: Any,
                                                unchanged: Any) -> None:
    good = sink_event(("public", "orders"), "u", {"id": 9}, {"id": 9}, 1)
    assert native([good]) is not None
    assert native([good, sink_event(("public", "orders"), op, key, after, 2,
                                    unchanged=unchanged)]) is None


def test_a_viewed_table_is_left_to_python() -> None:
    events = [sink_event(("public", "orders"), "u", {"id": 1}, {"id": 1}, 1)]
    assert native(events, frozenset({("public", "orders")})) is None
    assert native(events, frozenset({("public", "other")})) is not None


JSON_SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text())
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=4),
                           max_leaves=12)
KEY_SCALARS = (st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
               | st.text(alphabet=st.characters(codec="utf-8"), max_size=6))
TABLES = st.sampled_from([("public", "orders"), ("s", "li:nes"), ("é", "t*[x]")])
FIELD_NAMES = st.text(alphabet=st.characters(codec="utf-8", exclude_characters='"\\'),
                      max_size=6).filter(lambda name: all(c >= " " for c in name))


@st.composite
def plain_events(draw: st.DrawFn) -> list[SinkEvent]:
    made = []
    for number in range(draw(st.integers(1, 12))):
        names = draw(st.lists(st.sampled_from(["id", "b", "c:d", "é"]), min_size=1,
                              max_size=3, unique=True))
        key = {name: draw(KEY_SCALARS) for name in names}
        op = draw(st.sampled_from(["c", "u", "r", "d"]))
        after = draw(st.dictionaries(FIELD_NAMES, JSON_VALUES, max_size=6))
        dumps = draw(st.sampled_from([compact, json.dumps,
                                      lambda b: json.dumps(b, ensure_ascii=False, indent=2)]))
        made.append(sink_event(draw(TABLES), op, key, {**after, **key}, number, dumps=dumps))
    return made


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(events=plain_events())
def test_generated_plain_batches_give_identical_actions(events: list[SinkEvent]) -> None:
    rendered = native(events)
    if rendered is None:  # only a float the renderer leaves to Python (ambiguous digits)
        assert any(isinstance(v, float) for e in events for v in _values(e.event["after"]))
        return
    assert_same(rendered, events)


def _values(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _values(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _values(item)]
    return [value]


def test_vouched_documents_have_no_unindexable_value() -> None:
    fitting = always_fitting(MAPPINGS)
    rng = random.Random(11)
    vouched_count = 0
    for _ in range(5_000):
        fields = rng.sample([*sorted(MAPPINGS), "unmapped"], 4)
        documents = [{name: rng.choice(VALUES) for name in fields} for _ in range(2)]
        kinds: dict[str, int] = {}
        for document in documents:
            for name, value in document.items():
                kinds[name] = kinds.get(name, 0) | kind_of(value)
        if vouched(kinds, MAPPINGS, fitting):
            vouched_count += 1
            for document in documents:
                assert _unindexed_quickly(document, MAPPINGS, fitting) == [], document
    assert vouched_count >= 10  # (14 with this seed: most random values need a look)
    orders = {"id": MAPPINGS["long"], "note": MAPPINGS["text"]}
    assert vouched({"id": KIND_INT | KIND_NULL, "note": KIND_STR}, orders, always_fitting(orders))
    assert not vouched({"id": KIND_BIG_INT}, orders, always_fitting(orders))
    assert not vouched({"note": KIND_OBJECT}, orders, always_fitting(orders))
    dated = {"at": MAPPINGS["date"], "note": MAPPINGS["text"]}
    assert vouched({"at": KIND_STR | KIND_NULL}, dated, always_fitting(dated))
    infinite = KIND_STR | KIND_INFINITE_TEXT
    assert not vouched({"at": infinite}, dated, always_fitting(dated))
    assert vouched({"note": infinite}, dated, always_fitting(dated)), "a text takes any"


def test_deep_vouched_documents_have_no_unindexable_value() -> None:
    """Objects and lists too (a joined record's customer, items and their products): what
    ``deep_vouched`` vouches for by the kinds at each path, the full check passes."""
    mappings = {**MAPPINGS, **JOINED}
    values = [*VALUES, *JOINED_VALUES]
    rng = random.Random(13)
    vouched_count = 0
    for _ in range(5_000):
        fields = rng.sample([*sorted(mappings), "unmapped"], 4)
        documents = [{name: rng.choice(values) for name in fields} for _ in range(2)]
        kinds: dict[str, int] = {}
        for document in documents:
            for path, bits in deep_kinds_of(document).items():
                kinds[path] = kinds.get(path, 0) | bits
        if deep_vouched(kinds, mappings):
            vouched_count += 1
            for document in documents:
                assert unindexed_fields(document, mappings) == [], document
    assert vouched_count >= 15  # (23 with this seed: most random values need a look)
    record = {"id": 7, "customer": {"name": "Ann", "n": 3, "at": "2026-01-01"},
              "items": [{"line": 0, "note": "gift", "product": {"title": "Tea", "n": 1}},
                        {"line": 1, "note": None, "product": None}]}
    typed = {**JOINED, "customer": {"properties": {"name": JOINED["customer"]["properties"][
        "name"], "n": JOINED["customer"]["properties"]["n"]}}}  # no date: vouched by type
    assert deep_vouched(deep_kinds_of({**record, "customer": {"name": "Ann", "n": 3}}), typed)
    assert deep_vouched(deep_kinds_of(record), JOINED), "a date's text is indexed"
    infinite = {**record, "customer": {"name": "Ann", "n": 3, "at": "infinity"}}
    assert not deep_vouched(deep_kinds_of(infinite), JOINED), "an infinite date is looked at"
    assert not deep_vouched(deep_kinds_of({**record, "items": [{"line": 2**64}]}), JOINED)
    assert not deep_vouched(deep_kinds_of({**record, "items": ["scalar"]}), JOINED)


def test_a_joined_batch_is_vouched_for_without_a_look() -> None:
    """The native renderer's ``deep`` kinds of a batch of joined records vouch for it."""
    typed = {"id": MAPPINGS["long"], "customer": {"properties": {"name": MAPPINGS["text"]}},
             "items": {"type": "object", "properties": {
                 "line": MAPPINGS["long"], "product": {"properties": {"title": MAPPINGS[
                     "keyword"]}}}}}
    events = [sink_event(("public", "orders"), "u", {"id": n}, {
        "id": n, "customer": {"name": f"c{n}"},
        "items": [{"line": i, "product": {"title": f"p{i}"}} for i in range(3)]}, n)
        for n in range(1, 4)]
    rendered = native(events)
    assert_same(rendered, events)
    assert rendered is not None and rendered.deep[0] is not None
    assert deep_vouched(rendered.deep[0], typed)
    assert not vouched(rendered.fields[0], typed, always_fitting(typed)), "top level alone"
