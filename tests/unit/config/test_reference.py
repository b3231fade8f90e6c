"""The README's configuration reference is the one ``cdc.config.reference`` generates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc.config.reference import BEGIN, END, reference_markdown, replace_section, rows

README = Path(__file__).resolve().parents[3] / "README.md"


def test_readme_reference_is_up_to_date() -> None:
    text = README.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    assert text[start:end] == reference_markdown(), (
        "README.md's configuration reference is stale: run "
        "`python -m cdc.config.reference --write README.md`")


def test_every_section_and_metrics_key_is_listed() -> None:
    section = reference_markdown()
    for key in ("`source.dsn` (required)", "`log.partitions`",
                "`connectors[].backpressure.policy`", "`metrics.token_file`",
                "`connectors[].config.url` (required) (when type: webhook)",
                "`connectors[].config.urls` (when type: redis)"):
        assert key in section, key


def test_rows_walk_nested_objects_unions_and_arrays() -> None:
    schema: dict[str, Any] = {"$defs": {"Inner": {"type": "object", "required": ["a"],
                                  "properties": {"a": {"type": "integer", "default": 1,
                                                       "description": "an a"}}}},
              "type": "object",
              "properties": {"x": {"anyOf": [{"$ref": "#/$defs/Inner"}, {"type": "null"}]},
                             "ys": {"type": "array", "items": {"$ref": "#/$defs/Inner"}},
                             "mode": {"enum": ["p", "q"], "description": "p | q"}}}
    found = list(rows(schema, schema["$defs"], ""))
    assert ("`x.a` (required)", "integer", "`1`", "an a") in found
    assert ("`ys[].a` (required)", "integer", "`1`", "an a") in found
    assert ("`mode`", "`p` | `q`", "", "p | q") in found
    assert any(key == "`x`" and kind == "section or null" for key, kind, _, _ in found)


def test_replacing_needs_the_markers() -> None:
    assert replace_section(f"a\n{BEGIN}\nold\n{END}\nb", "NEW") == "a\nNEW\nb"
    with pytest.raises(ValueError, match="markers"):
        replace_section("no markers here", "NEW")
