"""Composite, range and multirange codecs."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.capture.codecs import (
    CodecError,
    composite_codec,
    decode_int,
    decode_text,
    decode_timestamp,
    multirange_codec,
    parse_range,
    range_codec,
)


def record_out(values: list[str | None]) -> str:
    """A row of text attributes as PostgreSQL's record_out writes it."""
    fields = []
    for value in values:
        if value is None:
            fields.append("")
        elif value == "" or re.search(r'[",\\() \t\n\r\v\f]', value):
            fields.append('"' + value.replace("\\", "\\\\").replace('"', '""') + '"')
        else:
            fields.append(value)
    return "(" + ",".join(fields) + ")"


def test_composite_attributes_by_name() -> None:
    codec = composite_codec([("a", decode_int), ("b", decode_text), ("c", decode_text)])
    assert codec('(1,"b c",)') == {"a": 1, "b": "b c", "c": None}
    assert codec('(,"",x)') == {"a": None, "b": "", "c": "x"}
    assert codec('(2,"say ""hi""","back\\\\slash")') == {
        "a": 2, "b": 'say "hi"', "c": "back\\slash"}


def test_composite_nested_and_empty() -> None:
    inner = composite_codec([("x", decode_int), ("y", decode_int)])
    outer = composite_codec([("p", inner), ("n", decode_text)])
    assert outer('("(1,2)",label)') == {"p": {"x": 1, "y": 2}, "n": "label"}
    assert composite_codec([])("()") == {}
    assert composite_codec([("only", decode_text)])("()") == {"only": None}


@pytest.mark.parametrize("text", ["1,2", "(1,2", "(1,2,3)", "(1)", '(1,"x)', "(a(b,c)"])
def test_malformed_composites(text: str) -> None:
    with pytest.raises(CodecError, match="composite"):
        composite_codec([("a", decode_text), ("b", decode_text)])(text)


attributes = st.lists(st.none() | st.text(st.characters(codec="utf-8"),
                                          max_size=6), min_size=1, max_size=5)


@given(attributes)
def test_composite_round_trip_through_record_out(values: list[str | None]) -> None:
    codec = composite_codec([(f"f{i}", decode_text) for i in range(len(values))])
    assert codec(record_out(values)) == {f"f{i}": v for i, v in enumerate(values)}


@pytest.mark.parametrize(("text", "expected"), [
    ("[1,10)", (1, 10, True, False)),
    ("(1,10]", (1, 10, False, True)),
    ("[1,10]", (1, 10, True, True)),
    ("(,5)", (None, 5, False, False)),
    ("[5,)", (5, None, True, False)),
    ("(,)", (None, None, False, False)),
])
def test_int_ranges(text: str, expected: tuple[object, object, bool, bool]) -> None:
    lower, upper, lower_inc, upper_inc = expected
    assert parse_range(text, decode_int) == {"lower": lower, "upper": upper,
                                             "lower_inc": lower_inc, "upper_inc": upper_inc,
                                             "empty": False}


def test_empty_range() -> None:
    assert range_codec(decode_int)("empty") == {"lower": None, "upper": None,
                                                "lower_inc": False, "upper_inc": False,
                                                "empty": True}


def test_range_bounds_are_decoded_by_the_subtype() -> None:
    text = '["2024-01-01 00:00:00","2024-02-01 12:30:00")'
    assert parse_range(text, decode_timestamp) == {
        "lower": "2024-01-01T00:00:00", "upper": "2024-02-01T12:30:00",
        "lower_inc": True, "upper_inc": False, "empty": False}
    assert parse_range('["a,b","c\\"d"]', decode_text)["upper"] == 'c"d'
    assert parse_range('["",z)', decode_text)["lower"] == ""


@pytest.mark.parametrize("text", ["", "[1,2", "1,2)", "[1)", "[1,2,3)", "{1,2}"])
def test_malformed_ranges(text: str) -> None:
    with pytest.raises(CodecError, match="range"):
        parse_range(text, decode_int)


def test_multiranges() -> None:
    codec = multirange_codec(decode_int)
    assert codec("{}") == []
    assert codec("{[1,3),[5,7)}") == [
        {"lower": 1, "upper": 3, "lower_inc": True, "upper_inc": False, "empty": False},
        {"lower": 5, "upper": 7, "lower_inc": True, "upper_inc": False, "empty": False}]
    assert codec("{(,0), [9,)}") == [
        {"lower": None, "upper": 0, "lower_inc": False, "upper_inc": False, "empty": False},
        {"lower": 9, "upper": None, "lower_inc": True, "upper_inc": False, "empty": False}]
    text_codec = multirange_codec(decode_text)
    ranges = text_codec('{["a)",b]}')
    assert isinstance(ranges, list) and isinstance(ranges[0], dict)
    assert ranges[0]["lower"] == "a)"


@pytest.mark.parametrize("text", ["[1,2)", "{[1,2)", "{[1,2),}", "{[1,2) x}", "{1}"])
def test_malformed_multiranges(text: str) -> None:
    with pytest.raises(CodecError, match="range"):
        multirange_codec(decode_int)(text)
