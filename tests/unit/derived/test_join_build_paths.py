"""The shortcuts of ``derived.join_build`` against the rule they shorten: nested lists in
``sort_value`` order then key order, and a looked-up row built once for many records."""

from __future__ import annotations

import random
from typing import Any

import pytest

from derived import JoinedView, RowsInMemory, build_record, build_records, sort_value

ITEMS_BY = {"source": "public.orders", "target": "orders",
            "nested": [{"name": "items", "source": "public.items", "on": {"id": "order_id"},
                        "order_by": ["line"]}]}
ITEMS_BY_KEY = {"source": "public.orders", "target": "orders",
                "nested": [{"name": "items", "source": "public.items", "on": {"id": "order_id"}}]}

# plain distinct numbers take the shortcut; ties, booleans, mixed types and text do not
LINES: list[list[Any]] = [[0, 1, 2], [2, 0, 1], [1.5, -3, 2], [1, 1, 0], [True, 0, 2],
                          [1, 1.0, 2], ["10", "9", 1], [None, 0, 1], [3, "a", 0.5],
                          [2**70, 2**70 + 1, -2**70]]


def expected_items(items: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    """The rule: ``sort_value`` of each ``order_by`` column, then of each key column."""
    return sorted(items, key=lambda item: (tuple(sort_value(item.get(c)) for c in order),
                                           (sort_value(item["id"]),)))


@pytest.mark.parametrize("lines", LINES)
def test_nested_order_by_a_column(lines: list[Any]) -> None:
    ids = random.Random(len(lines)).sample(range(100), len(lines))
    items = [{"id": i, "order_id": 1, "line": line} for i, line in zip(ids, lines, strict=True)]
    for shuffled in (items, items[::-1]):
        rows = RowsInMemory({("public", "items"): [({"id": it["id"]}, it) for it in shuffled]})
        record = build_record(JoinedView.model_validate(ITEMS_BY), {"id": 1}, rows)
        assert record is not None
        assert record["items"] == expected_items(items, ["line"])


@pytest.mark.parametrize("keys", [[3, 1, 2], [1, 2, 3], [2, 1.5, -1], ["b", "a", 1],
                                  [True, 2, 3]])
def test_nested_order_by_key_alone(keys: list[Any]) -> None:
    items = [{"id": key, "order_id": 1} for key in keys]
    rows = RowsInMemory({("public", "items"): [({"id": it["id"]}, it) for it in items]})
    record = build_record(JoinedView.model_validate(ITEMS_BY_KEY), {"id": 1}, rows)
    assert record is not None
    assert record["items"] == expected_items(items, [])


def test_a_looked_up_row_is_built_once_and_shared() -> None:
    view = JoinedView.model_validate({
        "source": "public.orders", "target": "orders",
        "lookups": [{"name": "customer", "source": "public.customers",
                     "on": {"customer_id": "id"}, "fields": ["name"]}]})
    rows = RowsInMemory({("public", "customers"): [({"id": 1}, {"id": 1, "name": "a"}),
                                                   ({"id": 2}, {"id": 2, "name": "b"})]})
    orders = [{"id": n, "customer_id": 1 + n % 2} for n in range(6)] + [None]
    built = build_records(view, orders, rows)
    assert built == [None if order is None else build_record(view, order, rows)
                     for order in orders]
    assert built[0] is not None and built[2] is not None and built[1] is not None
    assert built[0]["customer"] is built[2]["customer"]  # one object for both
    assert built[0]["customer"] is not built[1]["customer"]
