"""Name templates of the sinks: Redis keys, index names, and SCAN patterns."""

from __future__ import annotations

import re

import pytest

from connectors.placeholders import NameTemplate, TableNames

NAMES = TableNames(prefix="app", topic="app.public.orders", schema="public", table="orders")


@pytest.mark.parametrize(("template", "key", "rendered"), [
    ("{table}:{key}", {"id": 42}, "orders:42"),
    ("{prefix}:{schema}.{table}:{key}", {"a": 1, "b": "x:y"}, "app:public.orders:1:x\\:y"),
    ("product:{key.id}", {"id": 7, "v": 1}, "product:7"),
    ("{topic}/{key.b}/{key.a}", {"a": 1, "b": 2}, "app.public.orders/2/1"),
    ("{table}:{key.nope}", {"id": 1}, "orders:\\N"),
    ("static", {"id": 1}, "static"),
])
def test_render(template: str, key: dict[str, object], rendered: str) -> None:
    assert NameTemplate(template).render(NAMES, key) == rendered


@pytest.mark.parametrize(("template", "pattern"), [
    ("{table}:{key}", "orders:*"),
    ("{key}:{table}", "*:orders"),
    ("c[1]*?:{table}:{key.a}:{key.b}", "c\\[1\\]\\*\\?:orders:*:*"),
    ("{key}", "*"),
])
def test_pattern(template: str, pattern: str) -> None:
    assert NameTemplate(template).pattern(NAMES) == pattern


def test_pattern_escapes_table_names() -> None:
    names = TableNames("app", "app.public.we*ird", "public", "we*ird")
    assert NameTemplate("{table}:{key}").pattern(names) == "we\\*ird:*"


@pytest.mark.parametrize(("template", "words"), [
    ("{row}", "unknown placeholder {row}"),
    ("{table!r}", "no format spec"),
    ("{table:>10}", "no format spec"),
])
def test_invalid_templates(template: str, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        NameTemplate(template)


def test_table_names_from_the_topic() -> None:
    source = {"schema": "public", "table": "orders"}
    assert TableNames.of("app.public.orders", source, "fallback").prefix == "app"
    assert TableNames.of("a.b.public.orders", source).prefix == "a.b"
    assert TableNames.of("renamed", source, "fallback") == TableNames(
        "fallback", "renamed", "public", "orders")
    assert NameTemplate("{table}").uses_key is False
    assert NameTemplate("x:{key.id}").uses_key is True


@pytest.mark.parametrize("template", ["{table}:{key}", "{prefix}:{schema}.{table}:{key}",
                                      "product:{key.id}", "{topic}/{key.b}/{key.a}",
                                      "{table}:{key.nope}", "static", "{key}", "{key}{key}"])
@pytest.mark.parametrize("key", [{"id": 42}, {"a": 1, "b": "x:y"}, {"id": None, "b": True},
                                 {"a": "\\", "id": [1, {"z": 2, "y": 1}]}])
def test_bind_renders_like_render(template: str, key: dict[str, object]) -> None:
    bound = NameTemplate(template).bind(NAMES)
    assert bound(key) == NameTemplate(template).render(NAMES, key)
