"""The topic-name rule: every PostgreSQL name gives a valid topic; plain names keep theirs."""

from __future__ import annotations

import re

import pytest

from cdc.config.topic_names import MAX_TOPIC_LENGTH, TopicNamer, escape_name, table_topic
from cdc.errors import ConfigError

VALID = re.compile(r"[A-Za-z0-9._-]{1,249}")


def test_plain_names_keep_the_topic_they_always_had() -> None:
    assert table_topic("app", "public", "orders") == "app.public.orders"
    assert table_topic("app", "Sales-2", "Order_Items") == "app.Sales-2.Order_Items"


@pytest.mark.parametrize(("schema", "table", "topic"), [
    ("Sales Dept", "Order Items", "fid.Sales_x20_Dept.Order_x20_Items"),
    ("a.b", "c", "fid.a_x2e_b.c"),
    ("a", "b.c", "fid.a.b_x2e_c"),
    ("public", "café", "fid.public.caf_xe9_"),
    ("public", 'say "hi"', "fid.public.say_x20__x22_hi_x22_"),
    ("public", "😀", "fid.public._x1f600_"),
])
def test_other_characters_are_escaped_by_code_point(schema: str, table: str,
                                                    topic: str) -> None:
    assert table_topic("fid", schema, table) == topic
    assert VALID.fullmatch(topic)


def test_dots_inside_names_are_not_separators() -> None:
    assert table_topic("p", "a.b", "c") != table_topic("p", "a", "b.c")


def test_case_is_kept() -> None:
    assert table_topic("p", "public", "Orders") != table_topic("p", "public", "orders")


def test_long_names_are_cut_with_a_hash_of_the_whole_name() -> None:
    first = table_topic("p", "public", "é" * 63)  # 63 characters, 126 UTF-8 bytes
    second = table_topic("p", "public", "é" * 62 + "è")
    assert len(first) == MAX_TOPIC_LENGTH and VALID.fullmatch(first)
    assert first != second and first[:-9] == second[:-9]


def test_escape_is_identity_on_kept_characters() -> None:
    assert escape_name("abc_DEF-09") == "abc_DEF-09"


def test_override_by_plain_or_quoted_name() -> None:
    namer = TopicNamer("fid", {"Sales Dept.Order Items": "fid.sales.order_items",
                               '"x.y"."z"': "fid.xy.z"})
    assert namer.topic_for("Sales Dept", "Order Items") == "fid.sales.order_items"
    assert namer.topic_for("x.y", "z") == "fid.xy.z"
    assert namer.renamed([("public", "t"), ("Sales Dept", "Order Items")]) == [
        ("Sales Dept", "Order Items", "fid.sales.order_items")]


def test_collision_names_both_tables_and_the_key_that_resolves_it() -> None:
    namer = TopicNamer("p")
    with pytest.raises(ConfigError) as raised:
        namer.check_collisions([("public", "a b"), ("public", "a_x20_b")])
    message = str(raised.value)
    assert '"public"."a b"' in message and '"public"."a_x20_b"' in message
    assert "log.topic_names" in message and "'p.public.a_x20_b'" in message
    TopicNamer("p", {"public.a b": "p.public.a_space_b"}).check_collisions(
        [("public", "a b"), ("public", "a_x20_b")])


def test_topics_kafka_counts_as_the_same_are_a_collision() -> None:
    namer = TopicNamer("p")
    with pytest.raises(ConfigError) as raised:
        namer.check_collisions([("a_b", "c"), ("a", "b_c")])  # p.a_b.c and p.a.b_c
    message = str(raised.value)
    assert '"a_b"."c"' in message and '"a"."b_c"' in message
    assert "'p.a_b.c' and 'p.a.b_c'" in message and "Kafka" in message
    assert "log.topic_names" in message
    TopicNamer("p", {"a.b_c": "p.a.bc"}).check_collisions([("a_b", "c"), ("a", "b_c")])
