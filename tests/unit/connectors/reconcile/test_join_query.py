"""The reconcile oracle's SQL for joined views (``join_query``) and its Python shaping of
the nodes SQL returns (``JoinedSource.shape_record``): pure logic, no server."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg import sql

from cdc.capture.events import TableShape
from connectors.reconcile.join_query import (
    JoinQueryError,
    TableColumns,
    check_columns,
    joined_query,
    sort_keys,
)
from connectors.reconcile.join_source import JoinedSource
from derived import JoinedView

INT, TEXT, NUMERIC, TIMESTAMPTZ = 23, 25, 1700, 1184

TABLES = {
    ("public", "orders"): TableColumns(("id", "customer_id", "status"), (INT, INT, TEXT),
                                       ("id",)),
    ("public", "customers"): TableColumns(("id", "name", "active"), (INT, TEXT, 16), ("id",)),
    ("public", "order_items"): TableColumns(("order_id", "line", "sku", "qty"),
                                            (INT, INT, TEXT, INT), ("order_id", "line"),
                                            "qty >= 0"),
    ("public", "products"): TableColumns(("sku", "title"), (TEXT, TEXT), ("sku",)),
}


def shop_view(**root: Any) -> JoinedView:
    return JoinedView.model_validate({
        "source": "public.orders", "target": "orders_joined", **root,
        "lookups": [{"name": "customer", "source": "public.customers",
                     "on": {"customer_id": "id"}, "filter": "active", "required": True}],
        "nested": [{"name": "items", "source": "public.order_items", "on": {"id": "order_id"},
                    "order_by": ["sku"], "filter": "qty > 0",
                    "lookups": [{"name": "product", "source": "public.products",
                                 "on": {"sku": "sku"}}]}]})


def text(composed: sql.Composable) -> str:
    return composed.as_string(None)


# aliases are numbered as the query is built: r0 orders, l1 customer (t2), n3 items (t4),
# l5 an item's product (t6)


def test_lookups_are_lateral_joins_of_the_first_row_by_key() -> None:
    query = text(joined_query(shop_view(), TABLES))
    assert query.count("LEFT JOIN LATERAL") == 3  # customer, items, items' product
    customer = query[query.index('FROM "public"."customers"'):]
    assert '"t2"."id" = "r0"."customer_id"' in customer
    assert 'ORDER BY "t2"."id" ASC NULLS LAST LIMIT 1) AS "l1" ON true' in customer
    product = query[query.index('FROM "public"."products"'):]
    assert '"t6"."sku" = "t4"."sku"' in product and "LIMIT 1" in product
    assert 'COLLATE "C"' in product[:product.index("LIMIT 1")]  # a text key: sort_value's


def test_nested_lists_are_aggregated_in_sort_value_order() -> None:
    query = text(joined_query(shop_view(), TABLES))
    items = query[query.index("coalesce(json_agg("):query.index('FROM "public"."order_items"')]
    order = items[items.index(" ORDER BY "):]
    # sku (text: NULL last, numeric text by value, then by code point), then the key
    assert order.index("THEN 3") < order.index("::numeric") < order.index('COLLATE "C"') \
        < order.index('"t4"."order_id" ASC NULLS LAST') < order.index('"t4"."line" ASC')
    assert "'[]'::json" in items  # no child: an empty list, never null
    assert '"t4"."order_id" = "r0"."id"' in query
    assert "(qty >= 0)" in query  # the publication's row filter of the joined table


def test_values_are_read_as_their_types_output_text() -> None:
    query = text(joined_query(shop_view(), TABLES))
    assert "CASE WHEN \"r0\".\"status\" IS NULL THEN NULL ELSE format('%s', " \
        "\"r0\".\"status\") END" in query
    assert "::text FROM \"public\".\"orders\" AS \"r0\"" in query  # the node as JSON text
    assert query.endswith('ORDER BY "r0"."id"')


def test_filters_and_computed_fields_stay_out_of_sql() -> None:
    query = text(joined_query(shop_view(computed={"label": "upper(status)"},
                                        filter="status <> 'draft'"), TABLES))
    assert "draft" not in query and "upper" not in query and "active" not in \
        query.replace('"active"', "")


def test_identifiers_and_keys_are_quoted() -> None:
    tables = {("public", "orders"): TableColumns(('co"l',), (TEXT,), ('co"l',))}
    view = JoinedView.model_validate({"source": "public.orders", "target": "x"})
    query = text(joined_query(view, tables, keys=[("a'b",)]))
    assert "format('%s', \"r0\".\"co\"\"l\")" in query
    assert "(\"r0\".\"co\"\"l\") IN (('a''b'))" in query
    assert "false" in text(joined_query(view, tables, keys=[]))


@pytest.mark.parametrize(("type_oid", "native"), [(INT, True), (NUMERIC, True),
                                                  (TIMESTAMPTZ, True), (TEXT, False),
                                                  (2950, False)])
def test_sort_keys_by_type(type_oid: int, native: bool) -> None:
    keys = [text(key) for key in sort_keys(sql.Identifier("t"), "c", type_oid)]
    if native:
        assert keys == ['"t"."c" ASC NULLS LAST']
    else:
        assert len(keys) == 3 and keys[2].endswith("THEN format('%s', \"t\".\"c\") END "
                                                   'COLLATE "C"')


def test_unpublished_tables_and_join_columns_are_refused() -> None:
    missing = {k: v for k, v in TABLES.items() if k != ("public", "products")}
    with pytest.raises(JoinQueryError, match=r"public\.products"):
        check_columns(shop_view(), missing)
    narrow = dict(TABLES)
    narrow["public", "orders"] = TableColumns(("id", "status"), (INT, TEXT), ("id",))
    with pytest.raises(JoinQueryError, match=r"public\.orders\.customer_id"):
        joined_query(shop_view(), narrow)
    narrow = dict(TABLES)
    narrow["public", "order_items"] = TableColumns(("order_id", "line"), (INT, INT),
                                                   ("order_id", "line"))
    with pytest.raises(JoinQueryError, match=r"public\.order_items\.sku"):
        joined_query(shop_view(), narrow)


def _shape(table: str, columns: tuple[str, ...], codecs: tuple[Any, ...]) -> TableShape:
    return TableShape(0, "public", table, f"app.public.{table}", columns, codecs, (0,), 1, b"")


def _source(view: JoinedView) -> JoinedSource:
    source = JoinedSource.__new__(JoinedSource)
    source.view = view
    source.shapes = {
        ("public", "orders"): _shape("orders", ("id", "customer_id", "status"),
                                     (int, int, str)),
        ("public", "customers"): _shape("customers", ("id", "name", "active"),
                                        (int, str, lambda v: v == "t")),
        ("public", "order_items"): _shape("order_items", ("order_id", "line", "sku", "qty"),
                                          (int, int, str, int)),
        ("public", "products"): _shape("products", ("sku", "title"), (str, str)),
    }
    return source


def _order(customer: Any, items: list[Any]) -> list[Any]:
    return [["1", "7", "paid"], customer, items]


def _item(line: str, sku: str | None, qty: str, product: Any) -> list[Any]:
    return [["1", line, sku, qty], product]


def test_nodes_are_shaped_as_build_record_shapes_them() -> None:
    view = shop_view(exclude=["customer_id"], computed={"label": "upper(status)"})
    source = _source(view)
    node = _order([["7", "Ada", "t"]],
                  [_item("2", "9", "1", [["9", "Nine"]]), _item("3", "9", "0", None),
                   _item("1", None, "2", None)])
    assert source.shape_record(view, node) == {
        "id": 1, "status": "paid", "label": "PAID",
        "customer": {"id": 7, "name": "Ada", "active": True},
        "items": [{"order_id": 1, "line": 2, "sku": "9", "qty": 1,
                   "product": {"sku": "9", "title": "Nine"}},  # qty 0: filtered out
                  {"order_id": 1, "line": 1, "sku": None, "qty": 2, "product": None}]}


def test_a_required_lookup_its_filter_rejects_drops_the_record() -> None:
    view = shop_view()
    source = _source(view)
    assert source.shape_record(view, _order([["7", "Ada", "f"]], [])) is None
    assert source.shape_record(view, _order(None, [])) is None
    assert source.shape_record(shop_view(filter="status = 'sent'"),
                               _order([["7", "Ada", "t"]], [])) is None
