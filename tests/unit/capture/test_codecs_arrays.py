"""Array codec: nested lists from array_out's text, NULLs, quoting, bounds, delimiters."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.capture.codecs import CodecError, array_codec, decode_int, decode_text, parse_array

Nested = list["Nested"] | str | None


def array_out(value: list[Nested], delimiter: str = ",") -> str:
    """An array of text as PostgreSQL's array_out writes it."""
    items = []
    for item in value:
        if isinstance(item, list):
            items.append(array_out(item, delimiter))
        elif item is None:
            items.append("NULL")
        elif (item == "" or item.upper() == "NULL" or re.search(r'[{}"\\ \t\n\r\v\f]', item)
              or delimiter in item):
            escaped = item.replace("\\", "\\\\").replace('"', '\\"')
            items.append(f'"{escaped}"')
        else:
            items.append(item)
    return "{" + delimiter.join(items) + "}"


@pytest.mark.parametrize(("text", "expected"), [
    ("{}", []),
    ("{1,2,3}", [1, 2, 3]),
    ("{1,NULL,3}", [1, None, 3]),
    ("{{1,2},{3,4}}", [[1, 2], [3, 4]]),
    ("{{{1},{2}},{{3},{4}}}", [[[1], [2]], [[3], [4]]]),
    ("{{NULL,2},{3,NULL}}", [[None, 2], [3, None]]),
    ("[0:1]={1,2}", [1, 2]),
    ("[-2:-1][1:2]={{1,2},{3,4}}", [[1, 2], [3, 4]]),
])
def test_integer_arrays(text: str, expected: list[object]) -> None:
    assert parse_array(text, decode_int) == expected


def test_text_arrays_with_quotes_escapes_and_null_strings() -> None:
    text = r'{plain,"with space","","NULL",NULL,"q\"uote","back\\slash","{brace}","a,b"}'
    assert parse_array(text, decode_text) == [
        "plain", "with space", "", "NULL", None, 'q"uote', "back\\slash", "{brace}", "a,b"]


def test_box_arrays_use_semicolons() -> None:
    codec = array_codec(decode_text, ";")
    assert codec("{(2,2),(0,0);(1,1),(0,0)}") == ["(2,2),(0,0)", "(1,1),(0,0)"]


def test_elements_go_through_the_element_codec() -> None:
    nested = array_codec(array_codec(decode_int))  # not PostgreSQL, but composition works
    assert nested('{"{1,2}","{3}"}') == [[1, 2], [3]]


@pytest.mark.parametrize("text", ["", "1,2", "{1,2", "{1,2}}", "{{1},2}x", "{1,,2}", "{,}",
                                  "{1}{2}", '{"a}', "[0:1]{1,2}", "{{1}{2}}"])
def test_malformed_arrays(text: str) -> None:
    with pytest.raises(CodecError, match="array"):
        parse_array(text, decode_text)


elements = st.text(st.characters(codec="utf-8"), max_size=6)


@st.composite
def nested_arrays(draw: st.DrawFn, depth: int = 3) -> list[Nested]:
    """Rectangular arrays of up to ``depth`` dimensions of text and NULLs."""
    dims = [draw(st.integers(1, 3)) for _ in range(draw(st.integers(1, depth)))]

    def build(level: int) -> list[Nested]:
        if level == len(dims) - 1:
            return [draw(st.none() | elements) for _ in range(dims[level])]
        return [build(level + 1) for _ in range(dims[level])]

    return build(0)


@given(nested_arrays(), st.sampled_from([",", ";"]))
def test_round_trip_through_array_out(value: list[Nested], delimiter: str) -> None:
    assert parse_array(array_out(value, delimiter), decode_text, delimiter) == value


@given(st.lists(st.none() | st.integers(-(1 << 63), (1 << 63) - 1), max_size=8))
def test_flat_integer_arrays(value: list[int | None]) -> None:
    text = "{" + ",".join("NULL" if v is None else str(v) for v in value) + "}"
    assert parse_array(text, decode_int) == value
