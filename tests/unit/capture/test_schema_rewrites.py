"""Which schema changes alter rows nobody wrote since (``cdc.capture.schema.rewrites``)."""

from __future__ import annotations

from cdc.capture.schema.rewrites import SchemaRewrite, Signature

INT4, TEXT, BOOL, NUMERIC = 23, 25, 16, 1700
BEFORE: Signature = (("id", INT4, -1, True), ("v", INT4, -1, False), ("note", TEXT, -1, False))


def test_a_dropped_column_is_a_rewrite() -> None:
    after = BEFORE[:2]
    change = SchemaRewrite.between(BEFORE, after)
    assert change == SchemaRewrite(("note",), (), ())
    assert change.reason([]) == "dropped note"


def test_a_column_of_another_type_or_modifier_is_a_rewrite() -> None:
    after = (BEFORE[0], ("v", TEXT, -1, False), ("note", TEXT, 24, False))
    change = SchemaRewrite.between(BEFORE, after)
    assert change.retyped == ("v", "note")
    assert change.reason([]) == "changed the type of v, note"


def test_an_added_column_is_a_rewrite_only_with_a_value_in_old_rows() -> None:
    after = (*BEFORE, ("flag", BOOL, -1, False), ("extra", NUMERIC, -1, False))
    change = SchemaRewrite.between(BEFORE, after)
    assert change.added == ("flag", "extra")
    assert change.reason([]) is None  # added without a default: NULL, as an absent field
    assert change.reason(["flag"]) == "added flag with a value in existing rows"


def test_a_renamed_column_is_dropped_and_added() -> None:
    after = (BEFORE[0], BEFORE[1], ("remark", TEXT, -1, False))
    change = SchemaRewrite.between(BEFORE, after)
    assert (change.dropped, change.added) == (("note",), ("remark",))
    assert change.reason([]) == "dropped note"


def test_a_key_flag_change_alone_is_no_rewrite() -> None:
    after = (("id", INT4, -1, True), ("v", INT4, -1, True), ("note", TEXT, -1, False))
    assert SchemaRewrite.between(BEFORE, after).reason([]) is None


def test_every_kind_at_once_is_named() -> None:
    after = (BEFORE[0], ("v", TEXT, -1, False), ("flag", BOOL, -1, False))
    assert SchemaRewrite.between(BEFORE, after).reason(["flag"]) == (
        "dropped note; changed the type of v; added flag with a value in existing rows")
