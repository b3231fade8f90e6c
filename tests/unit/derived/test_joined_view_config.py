"""Joined views in ``pipeline.yaml``: what is accepted, and the errors naming the fix."""

from __future__ import annotations

import pytest

from cdc.config import parse_config
from cdc.errors import ConfigError
from derived import JoinedView, RowsInMemory, build_record, sort_value

PIPELINE = """
source: {{dsn: "postgresql://app@127.0.0.1/app", slot: s, publication: p}}
log: {{backend: file, path: /tmp/log}}
connectors:
  - name: search
    type: opensearch
    topics: [app.public.orders]
    workers: {workers}
    config:
      hosts: ["http://127.0.0.1:9200"]
{views}
      joins:
        - source: public.orders
          target: orders
          lookups:
            - name: customer
              source: public.customers
              on: {{customer_id: id}}
              required: {required}
          nested:
            - name: items
              source: public.items
              on: {{id: order_id}}
              order_by: [line]
"""


def _pipeline(workers: int = 1, views: str = "", required: str = "false") -> str:
    return PIPELINE.format(workers=workers, views=views, required=required)


def test_an_unquoted_on_key_is_read_as_on() -> None:
    config = parse_config(_pipeline())
    join = config.connectors[0].config.joins[0]  # type: ignore[attr-defined]
    assert join.lookups[0].on == {"customer_id": "id"}
    assert join.nested[0].on == {"id": "order_id"}


@pytest.mark.parametrize(("text", "expected"), [
    (_pipeline(workers=2), "connectors[0].workers: a connector with joins runs one worker"),
    (_pipeline(views="      views: [{source: public.orders, target: plain}]"),
     "joins[0].source: views[0] also reads"),
    (_pipeline(views="      views: [{source: public.items, target: orders}]"),
     "joins[0].target: views[0] already writes"),
])
def test_conflicting_settings_name_the_field(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(text)
    assert expected in str(error.value)


@pytest.mark.parametrize(("on", "expected"), [
    ({}, "name at least one pair of columns"),
    ("foreign", "foreign_key"),
])
def test_on_names_columns_or_the_foreign_key(on: object, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        JoinedView.model_validate({
            "source": "public.orders", "target": "orders",
            "lookups": [{"name": "customer", "source": "public.customers", "on": on}]})
    view = JoinedView.model_validate({
        "source": "public.orders", "target": "orders",
        "lookups": [{"name": "customer", "source": "public.customers", "on": "foreign_key"}]})
    with pytest.raises(ValueError, match="not yet read from the database"):
        view.lookups[0].join_on()


def test_a_joined_name_may_not_hide_a_field() -> None:
    with pytest.raises(ValueError, match="already a field"):
        JoinedView.model_validate({
            "source": "public.orders", "target": "orders", "fields": ["id", "customer"],
            "lookups": [{"name": "customer", "source": "public.customers",
                         "on": {"customer_id": "id"}}]})


def test_required_is_only_for_lookups() -> None:
    with pytest.raises(ValueError, match="only a lookup can be required"):
        JoinedView.model_validate({
            "source": "public.orders", "target": "orders",
            "nested": [{"name": "items", "source": "public.items", "on": {"id": "order_id"},
                        "required": True}]})


def test_required_lookup_drops_the_record_and_null_joins_nothing() -> None:
    view = JoinedView.model_validate(parse_config(_pipeline(required="true")).connectors[0]
                                     .config.joins[0].model_dump(by_alias=True))  # type: ignore[attr-defined]
    rows = RowsInMemory({("public", "customers"): [({"id": 1}, {"id": 1, "name": "a"})],
                         ("public", "items"): [({"id": 9}, {"id": 9, "order_id": None,
                                                            "line": 1})]})
    assert build_record(view, {"id": 5, "customer_id": 2}, rows) is None
    assert build_record(view, {"id": 5, "customer_id": None}, rows) is None
    record = build_record(view, {"id": 5, "customer_id": 1}, rows)
    assert record == {"id": 5, "customer_id": 1, "customer": {"id": 1, "name": "a"},
                      "items": []}


def test_nested_lists_order_by_value_then_key() -> None:
    values = ["10", "9", "1.5", None, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.5Z", "b",
              "a"]
    ordered = sorted(values, key=sort_value)
    assert ordered == ["1.5", "9", "10", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.5Z",
                       "a", "b", None]
