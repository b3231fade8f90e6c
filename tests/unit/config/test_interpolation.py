"""``${VAR}`` interpolation and YAML line numbers, below the loader."""

from __future__ import annotations

import pytest

from cdc.config.interpolation import InterpolationError, interpolate, interpolate_document
from cdc.config.yaml_source import parse_yaml
from cdc.errors import ConfigError

ENV = {"HOST": "db", "EMPTY": "", "PORT": "5432"}


@pytest.mark.parametrize(("text", "expected"), [
    ("${HOST}", "db"),
    ("postgresql://${HOST}:${PORT}/app", "postgresql://db:5432/app"),
    ("${MISSING:-fallback}", "fallback"),
    ("${EMPTY:-fallback}", "fallback"),
    ("${EMPTY}", ""),
    ("${MISSING:-}", ""),
    ("${MISSING:-a:b/c}", "a:b/c"),
    ("$${HOST}", "${HOST}"),
    ("cost: $5 and $HOST", "cost: $5 and $HOST"),
    ("no references", "no references"),
])
def test_interpolate(text: str, expected: str) -> None:
    assert interpolate(text, ENV) == expected


@pytest.mark.parametrize(("text", "words"), [
    ("${MISSING}", "environment variable 'MISSING' is not set"),
    ("${HOST", "unterminated '${'"),
    ("${bad-name}", "invalid variable reference '${bad-name}'"),
    ("${}", "invalid variable reference"),
])
def test_interpolate_rejects(text: str, words: str) -> None:
    with pytest.raises(InterpolationError, match=words.replace("$", r"\$").replace("{", r"\{")
                       .replace("}", r"\}")):
        interpolate(text, ENV)


def test_interpolate_document_reports_paths_and_leaves_keys_alone() -> None:
    data = {"${HOST}": "x", "list": ["${HOST}", "${NOPE}"], "n": 3, "nested": {"a": "${NOPE}"}}
    result, problems = interpolate_document(data, ENV)
    assert result == {"${HOST}": "x", "list": ["db", "${NOPE}"], "n": 3,
                      "nested": {"a": "${NOPE}"}}
    assert [path for path, _ in problems] == [("list", 1), ("nested", "a")]


def test_yaml_lines_of_keys_and_items() -> None:
    document = parse_yaml("a:\n  b: 1\n  c:\n    - x\n    - y: 2\n")
    assert document.data == {"a": {"b": 1, "c": ["x", {"y": 2}]}}
    assert document.lines == {("a",): 1, ("a", "b"): 2, ("a", "c"): 3, ("a", "c", 0): 4,
                              ("a", "c", 1): 5, ("a", "c", 1, "y"): 5}


def test_yaml_is_safe() -> None:
    with pytest.raises(ConfigError, match="could not determine a constructor"):
        parse_yaml("a: !!python/object/apply:os.system ['true']\n")


def test_yaml_recursive_alias_does_not_hang() -> None:
    document = parse_yaml("a: &x [*x]\n")
    assert isinstance(document.data, dict)


def test_yaml_several_documents() -> None:
    with pytest.raises(ConfigError, match="expected a single document"):
        parse_yaml("a: 1\n---\nb: 2\n")
