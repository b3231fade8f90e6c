"""Keys as text: document ids and cache keys, one implementation for sinks and Spark."""

from __future__ import annotations

from typing import Any

import pytest

from derived import encode_key, key_text


@pytest.mark.parametrize(("key", "text"), [
    ({"id": 42}, "42"),
    ({"code": "ab:c"}, "ab:c"),                      # one column: as is, never escaped
    ({"flag": True}, "true"),
    ({"id": None}, "\\N"),
    ({"order_id": 7, "line": 2}, "7:2"),
    ({"a": "x:y", "b": "z"}, "x\\:y:z"),
    ({"a": "x\\", "b": ":"}, "x\\\\:\\:"),
    ({"a": None, "b": "\\N"}, "\\N:\\\\N"),          # NULL and the text \N stay apart
    ({"a": {"y": 1, "x": [2]}, "b": 1.5}, '{"x"\\:[2],"y"\\:1}:1.5'),
    ({}, ""),
])
def test_encode_key(key: dict[str, Any], text: str) -> None:
    assert encode_key(key) == text


def test_composite_keys_never_collide() -> None:
    keys = [{"a": a, "b": b} for a in ("", ":", "\\", "x:", ":x", None, "\\N")
            for b in ("", ":", "\\", "y", None)]
    assert len({encode_key(key) for key in keys}) == len(keys)


def test_the_separator_is_a_parameter() -> None:
    assert encode_key({"a": "x|y", "b": 1}, separator="|") == "x\\|y|1"


def test_key_text_of_values() -> None:
    assert [key_text(v) for v in ("s", 3, False, None, [1, "a"])] == [
        "s", "3", "false", "\\N", '[1,"a"]']
