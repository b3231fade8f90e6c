"""``source.tables`` entries: exact names, globs, exclusions, quoted names."""

from __future__ import annotations

import pytest

from cdc.capture.source.table_selection import (
    PatternError,
    TableSelection,
    parse_pattern,
    quote_name,
)

CATALOG = [
    ("public", "orders", False), ("public", "audit_log", False),
    ("public", "audit_2024", False), ("public", "Users", False),
    ("public", "events", False), ("public", "events_2024", True),
    ("sales", "order_lines", False), ("sales", "order_2024", False),
    ("sales", "customers", False), ("Odd Schema", "a.b*", False),
]


def chosen(*entries: str) -> list[str]:
    return [f"{s}.{t}" for s, t in TableSelection.parse(entries).resolve(CATALOG)]


def test_a_schema_glob_selects_its_tables_but_not_partitions() -> None:
    assert chosen("public.*") == ["public.Users", "public.audit_2024", "public.audit_log",
                                  "public.events", "public.orders"]


def test_exclusions_remove_what_they_match() -> None:
    assert chosen("public.*", "!public.audit_*") == ["public.Users", "public.events",
                                                     "public.orders"]


def test_only_exclusions_select_everything_else() -> None:
    assert chosen("!public.*", "!sales.order_*") == ["Odd Schema.a.b*", "sales.customers"]


def test_prefix_globs_question_marks_and_classes() -> None:
    assert chosen("sales.order_*") == ["sales.order_2024", "sales.order_lines"]
    assert chosen("public.audit_20?4") == ["public.audit_2024"]
    assert chosen("public.[ou]*") == ["public.orders"]
    assert chosen("public.[!ao]*") == ["public.Users", "public.events"]
    assert chosen("*.order*") == ["public.orders", "sales.order_2024", "sales.order_lines"]


def test_exact_names_are_case_sensitive_and_may_name_a_partition() -> None:
    assert chosen("public.users") == []
    assert chosen("public.Users") == ["public.Users"]
    assert chosen("public.events_2024") == ["public.events_2024"]


def test_quoted_names_hold_any_character_literally() -> None:
    assert chosen('"Odd Schema"."a.b*"') == ["Odd Schema.a.b*"]
    assert chosen('"Odd Schema".*') == ["Odd Schema.a.b*"]
    pattern = parse_pattern('public."say ""hi"""')
    assert pattern.exact == ("public", 'say "hi"')


def test_quote_name_round_trips() -> None:
    for schema, table, _ in CATALOG:
        assert parse_pattern(quote_name(schema, table)).exact == (schema, table)
    assert quote_name("public", "orders") == "public.orders"


def test_system_schemas_are_never_selected() -> None:
    selection = TableSelection.parse(["*.*"])
    assert not selection.selects("pg_catalog", "pg_class")
    assert not selection.selects("information_schema", "tables")
    assert selection.selects("public", "orders")


def test_whole_schemas_are_those_no_exclusion_touches() -> None:
    selection = TableSelection.parse(["public.*", "sales.*", "crm.contacts",
                                      "!public.audit_*"])
    assert selection.whole_schemas() == ("sales",)
    assert TableSelection.parse(["public.*", "!*.tmp"]).whole_schemas() == ()
    assert TableSelection.parse(["public.o*"]).whole_schemas() == ()


def test_exact_only_and_unmatched_patterns() -> None:
    assert TableSelection.parse(["public.orders", "sales.customers"]).exact_only
    assert not TableSelection.parse(["public.orders", "sales.*"]).exact_only
    assert not TableSelection.parse(["public.orders", "!public.x"]).exact_only
    assert TableSelection.parse(["public.nope_*", "public.orders"]).unmatched(CATALOG) == [
        "public.nope_*"]


@pytest.mark.parametrize(("entry", "says"), [
    ("orders", "exactly one '.'"),
    ("a.b.c", "quote a name that holds a dot"),
    ("public.my table", "double quotes"),
    ("public.[abc", "never closed"),
    ("public.[z-a]*", "not a valid glob"),
    ('"unterminated.x', "expected 'schema.table'"),
    ('"a"x.y', "unexpected 'x'"),
    ("!", "expected 'schema.table'"),
    ("public.", "expected 'schema.table'"),
])
def test_bad_entries_say_what_to_write(entry: str, says: str) -> None:
    with pytest.raises(PatternError) as caught:
        parse_pattern(entry)
    assert says in str(caught.value)
    assert repr(entry) in str(caught.value)
