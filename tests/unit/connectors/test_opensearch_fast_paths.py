"""OpenSearch sink hot path: the action lines filled into byte templates are the bytes the
header dicts encode to, and the quick unindexed-values check finds what the full one finds."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from connectors.opensearch.bulk import delete_action, index_action
from connectors.opensearch.mapping import (
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    KEYWORD,
    LONG,
    NUMERIC,
    OBJECT,
    TEXT,
    range_mapping,
)
from connectors.opensearch.unindexed import (
    _unindexed_quickly,
    always_fitting,
    unindexed_fields,
)

from .sink_events import TableEvents

IDS = ["1", "", 'a"quoted"\\id', "ünïcødé:ключ", "tab\there\nnewline", "x" * 600, "\u2028"]


@pytest.mark.parametrize("doc_id", IDS)
@pytest.mark.parametrize("alias", ["orders", "a\"b", "é"])
def test_action_lines_are_the_dicts_encoded(doc_id: str, alias: str) -> None:
    event = TableEvents().upsert({"id": 1, "n": 2**60}, 0x16B37A0, 3)
    document = {"n": 2**60, "s": doc_id}
    expected_index = orjson.dumps({"index": {
        "_index": alias, "_id": doc_id, "version": event.version,
        "version_type": "external_gte", "require_alias": True}})
    assert index_action(event, alias, doc_id, document).payload == (
        expected_index + b"\n" + orjson.dumps(document) + b"\n")
    expected_delete = orjson.dumps({"delete": {
        "_index": alias, "_id": doc_id, "version": event.version,
        "version_type": "external_gte"}})
    assert delete_action(event, alias, doc_id).payload == expected_delete + b"\n"


MAPPINGS: dict[str, Any] = {
    "text": TEXT, "keyword": KEYWORD, "numeric": NUMERIC, "date": DATE, "long": LONG,
    "double": DOUBLE, "boolean": BOOLEAN, "object": OBJECT, "binary": BINARY,
    "range": range_mapping(DOUBLE), "nested": {"properties": {"a": LONG, "b": DATE}},
    "untyped": {}, "integer": {"type": "integer"},
}
VALUES: list[Any] = [
    None, True, False, 0, -5, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 1.5,
    float("inf"), "x", "", "12", "NaN", "Infinity", "infinity", "-infinity", "2026-01-01",
    {"a": 1}, {"a": "many", "b": "infinity"}, {"lower": "NaN", "upper": 1.0}, [], [1, "NaN"],
    [{"a": 1}, None], [None], ["x", {"a": 1}], [[1]],
]


def test_the_quick_check_finds_what_the_full_one_finds() -> None:
    fitting = always_fitting(MAPPINGS)
    rng = random.Random(7)
    for _ in range(5_000):
        fields = rng.sample([*sorted(MAPPINGS), "unmapped"], 4)
        document = {name: rng.choice(VALUES) for name in fields}
        assert _unindexed_quickly(document, MAPPINGS, fitting) == unindexed_fields(
            document, MAPPINGS), document
    for name in MAPPINGS:  # every value in every field, once
        for value in VALUES:
            document = {name: value}
            assert _unindexed_quickly(document, MAPPINGS, fitting) == unindexed_fields(
                document, MAPPINGS), document


JOINED = {"id": LONG, "customer": {"properties": {"name": TEXT, "n": LONG, "at": DATE}},
          "items": {"properties": {"line": LONG, "note": KEYWORD,
                                   "product": {"properties": {"title": TEXT, "n": LONG}}}}}
JOINED_VALUES: list[Any] = [
    None, 1, 2**64, "x", "infinity", "2026-01-01", 1.5, {"a": 1}, [1, 2], [None],
    {"name": "x", "n": 2**64, "at": "infinity"}, {"name": {"x": 1}, "n": -(2**63)},
    [{"line": 1, "note": {"y": 2}, "product": {"title": "t", "n": "NaN"}}, None,
     {"line": "2", "product": [{"n": 2**63}, {"title": ["a", {"b": 1}]}]}],
    [{"line": 3, "note": "n", "product": None}, {"product": "scalar"}],
]


def test_the_quick_check_of_objects_finds_what_the_full_one_finds() -> None:
    """A joined record's objects (a customer, a list of items, their products): their
    properties are vouched for by type at every level, the rest looked at."""
    fitting = always_fitting(JOINED)
    rng = random.Random(5)
    for _ in range(3_000):
        documents = [{name: rng.choice(JOINED_VALUES) for name in JOINED} for _ in range(3)]
        objects: dict[int, dict[str, frozenset[type]]] = {}  # shared by a batch, as observe
        for document in documents:
            assert _unindexed_quickly(document, JOINED, fitting, objects) == unindexed_fields(
                document, JOINED), document
