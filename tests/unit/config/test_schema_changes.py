"""``source.schema_changes``: the action per table, and patterns refused with the fix."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cdc.config.source import SchemaChangesConfig


def test_the_first_matching_pattern_wins_else_the_default() -> None:
    policy = SchemaChangesConfig.model_validate(
        {"tables": {"public.audit_*": "ignore", "public.*": "resnapshot"},
         "default": "ignore"})
    assert policy.action_for("public", "audit_log") == "ignore"
    assert policy.action_for("public", "orders") == "resnapshot"
    assert policy.action_for("sales", "orders") == "ignore"


def test_the_default_is_to_read_the_table_again_without_a_size_limit() -> None:
    policy = SchemaChangesConfig()
    assert policy.action_for("public", "orders") == "resnapshot"
    assert policy.confirm_above_rows is None


@pytest.mark.parametrize(("entry", "says"), [
    ("!public.audit_*", "set the table to 'ignore' instead of excluding it"),
    ("public.", "expected 'schema.table'"),
])
def test_a_bad_pattern_names_the_entry_and_the_fix(entry: str, says: str) -> None:
    with pytest.raises(ValidationError) as raised:
        SchemaChangesConfig.model_validate({"tables": {entry: "ignore"}})
    assert says in str(raised.value) and entry in str(raised.value)


def test_an_unknown_action_is_refused() -> None:
    with pytest.raises(ValidationError, match="resnapshot"):
        SchemaChangesConfig.model_validate({"default": "merge"})
