"""View definitions: validation, application, and rows with unchanged TOAST columns."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from derived import (
    ViewDefinition,
    apply_view,
    apply_view_keeping,
    complete_record,
    plan_unchanged,
    recover_columns,
)

ROW: dict[str, Any] = {"id": 1, "status": "paid", "title": "Book", "body": "long text",
                       "amount": "12.50", "secret": "s"}


def view(**settings: Any) -> ViewDefinition:
    return ViewDefinition.model_validate({"source": "public.orders", "target": "orders_view",
                                          **settings})


def problems(**settings: Any) -> dict[tuple[Any, ...], str]:
    with pytest.raises(ValidationError) as caught:
        view(**settings)
    return {tuple(error["loc"]): error["msg"] for error in caught.value.errors()}


def test_no_view_is_the_row_as_is() -> None:
    assert apply_view(None, ROW) == ROW
    assert apply_view(None, ROW) is not ROW


def test_selection_renames_and_computed_fields() -> None:
    orders = view(fields=["id", "title", "amount"], rename={"title": "name"},
                  computed={"label": "concat(upper(status), ': ', title)",
                            "doubled": "amount * 2"})
    assert apply_view(orders, ROW) == {"id": 1, "name": "Book", "amount": "12.50",
                                       "label": "PAID: Book", "doubled": "25.00"}


def test_exclude_copies_every_other_column() -> None:
    assert apply_view(view(exclude=["secret", "body"]), ROW) == {
        "id": 1, "status": "paid", "title": "Book", "amount": "12.50"}


def test_a_computed_field_wins_over_a_copied_one() -> None:
    record = apply_view(view(computed={"title": "lower(title)"}), ROW)
    assert record is not None
    assert record["title"] == "book"


def test_filter_drops_rows_that_are_not_true() -> None:
    paid = view(filter="status = 'paid' AND amount >= 10")
    assert apply_view(paid, ROW) is not None
    assert apply_view(paid, {**ROW, "status": "draft"}) is None
    assert apply_view(paid, {**ROW, "amount": None}) is None  # NULL is not true


def test_missing_columns_are_left_out() -> None:
    assert apply_view(view(fields=["id", "body"]), {"id": 1}) == {"id": 1}


@pytest.mark.parametrize(("settings", "loc", "words"), [
    ({"source": "orders"}, ("source",), "'schema.table'"),
    ({"target": "Orders"}, ("target",), "lowercase name"),
    ({"fields": ["id"], "exclude": ["body"]}, ("exclude",), "not both"),
    ({"fields": ["id"], "rename": {"title": "name"}}, ("rename", "title"), "not copied"),
    ({"exclude": ["title"], "rename": {"title": "name"}}, ("rename", "title"), "not copied"),
    ({"fields": ["id", "title"], "rename": {"title": "id"}}, ("rename",),
     "two columns become the field 'id'"),
    ({"computed": {"x": "concat(a,"}}, ("computed", "x"), "at character 10"),
    ({"filter": "os.system('x')"}, ("filter",), "unexpected '.'"),
    ({"key_template": "{row.id}"}, ("key_template",), "unknown placeholder {row.id}"),
    ({"colour": "red"}, ("colour",), "Extra inputs are not permitted"),
])
def test_invalid_definitions_name_the_field(settings: dict[str, Any], loc: tuple[Any, ...],
                                            words: str) -> None:
    assert words in problems(**settings)[loc]


def test_unchanged_columns_without_a_view_keep_their_fields() -> None:
    plan = plan_unchanged(None, {"body"})
    assert plan.keep == frozenset({"body"})
    assert plan.problem is None
    assert apply_view_keeping(None, {"id": 1}, plan.keep) == {"id": 1}


def test_unchanged_columns_keep_copied_and_derived_fields() -> None:
    orders = view(fields=["id", "body"], rename={"body": "text"},
                  computed={"size": "length(body)", "shout": "upper(status)"})
    plan = plan_unchanged(orders, {"body"})
    assert plan.keep == frozenset({"text", "size"})
    assert plan.problem is None
    assert apply_view_keeping(orders, {"id": 1, "status": "new"}, plan.keep) == {
        "id": 1, "shout": "NEW"}


def test_a_field_mixing_unchanged_and_resent_columns_cannot_be_derived() -> None:
    orders = view(computed={"summary": "concat(title, body)"}, filter="body IS NOT NULL")
    plan = plan_unchanged(orders, {"body"})
    assert plan.problem is not None
    assert "computed field 'summary' reads 'body'" in plan.problem
    assert "together with 'title'" in plan.problem
    assert "the filter reads 'body'" in plan.problem
    assert "REPLICA IDENTITY FULL" in plan.problem


def test_recover_columns_reads_verbatim_copies_back() -> None:
    orders = view(fields=["id", "body", "title"], rename={"body": "text"},
                  computed={"title": "upper(title)"})
    stored = {"id": 1, "text": "old body", "title": "BOOK"}
    assert recover_columns(orders, stored, {"body", "title", "status"}) == {"body": "old body"}
    assert recover_columns(None, {"body": "b"}, {"body", "x"}) == {"body": "b"}


def test_complete_record_takes_unchanged_columns_from_the_stored_record() -> None:
    orders = view(rename={"body": "text"}, computed={"size": "length(body)"})
    row = {k: v for k, v in ROW.items() if k != "body"}
    stored = {**apply_view(orders, ROW), "size": 9}  # type: ignore[dict-item]
    done = complete_record(orders, row, frozenset({"body"}), stored)
    assert done.problem is None and not done.unfilled
    assert done.record == {**apply_view(orders, ROW), "size": 9}  # type: ignore[dict-item]
    nothing = complete_record(orders, row, frozenset({"body"}), None)
    assert nothing.unfilled == {"size", "text"} and nothing.record is not None
    assert "text" not in nothing.record and "size" not in nothing.record
    mixed = view(computed={"blurb": "concat(title, body)"})
    refused = complete_record(mixed, row, frozenset({"body"}), None)
    assert refused.record is None and refused.problem is not None and "blurb" in refused.problem
    assert complete_record(view(filter="status = 'open'"), row, frozenset(), None).record is None
