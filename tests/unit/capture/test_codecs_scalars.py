"""Scalar codecs: booleans, integers, floats, numeric, text, bytea, json."""

from __future__ import annotations

import base64
import json
import math
from decimal import Decimal

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.capture.codecs import (
    CodecError,
    decode_bool,
    decode_bytea,
    decode_float,
    decode_int,
    decode_json,
    decode_numeric,
    decode_text,
)


def test_bool() -> None:
    assert decode_bool("t") is True
    assert decode_bool("f") is False
    with pytest.raises(CodecError, match="boolean"):
        decode_bool("true")


@given(st.integers(-(1 << 63), (1 << 64) - 1))
def test_integers_stay_integers(value: int) -> None:
    assert decode_int(str(value)) == value


def test_integer_error_does_not_echo_the_value() -> None:
    with pytest.raises(CodecError) as caught:
        decode_int("secret-123")
    assert "secret" not in str(caught.value)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_finite_floats_round_trip(value: float) -> None:
    decoded = decode_float(repr(value))
    assert decoded == value and isinstance(decoded, float)


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity"])
def test_special_floats_become_strings(text: str) -> None:
    assert decode_float(text) == text


def test_float_text_as_postgres_writes_it() -> None:
    assert decode_float("1e+100") == 1e100
    assert decode_float("-0") == 0.0 and math.copysign(1, decode_float("-0")) == -1  # type: ignore[arg-type]
    with pytest.raises(CodecError):
        decode_float("inf")  # Python's spelling, never PostgreSQL's
    with pytest.raises(CodecError):
        decode_float("abc")


@given(st.decimals(allow_nan=False, allow_infinity=False, places=20))
def test_numeric_keeps_every_digit(value: Decimal) -> None:
    text = f"{value:f}"
    assert decode_numeric(text) == text


def test_numeric_specials_and_forty_digits() -> None:
    forty = "1234567890123456789012345678901234567890.0000000001"
    for text in ("NaN", "Infinity", "-Infinity", forty):
        assert decode_numeric(text) == text


def test_text_passes_through_and_escapes_non_utf8_bytes() -> None:
    assert decode_text("plain") == "plain"
    assert decode_text("ünï ✓") == "ünï ✓"
    escaped = b"caf\xe9 ok".decode("utf-8", "surrogateescape")
    assert decode_text(escaped) == "caf\\xe9 ok"
    orjson.dumps(decode_text(escaped))  # serialisable


@given(st.binary(max_size=64))
def test_bytea_hex_to_base64(raw: bytes) -> None:
    assert decode_bytea("\\x" + raw.hex()) == base64.b64encode(raw).decode()


def _bytea_escape_output(raw: bytes) -> str:
    """PostgreSQL's ``bytea_output = escape`` rendering."""
    out = []
    for byte in raw:
        if byte == 0x5C:
            out.append("\\\\")
        elif 0x20 <= byte < 0x7F:
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


@given(st.binary(max_size=64))
def test_bytea_escape_output_to_base64(raw: bytes) -> None:
    assert decode_bytea(_bytea_escape_output(raw)) == base64.b64encode(raw).decode()


def test_bytea_rejects_garbage() -> None:
    with pytest.raises(CodecError, match="bytea"):
        decode_bytea("\\xzz")
    with pytest.raises(CodecError, match="bytea"):
        decode_bytea("a\\b")


def test_json_nested() -> None:
    text = '{"a": [1, 2.5, null, true], "b": {"c": "ü"}, "d": -0.1}'
    assert decode_json(text) == {"a": [1, 2.5, None, True], "b": {"c": "ü"}, "d": -0.1}
    assert decode_json("[]") == []
    assert decode_json('"s"') == "s"
    assert decode_json("12") == 12


def test_json_numbers_a_double_or_int64_cannot_hold_stay_exact() -> None:
    text = ('{"big": 123456789012345678901234567890, "neg": -9223372036854775809, '
            '"u64": 18446744073709551615, "long": 0.12345678901234567890123, '
            '"ok": 1.25, "huge": 1e400, "phone": "12345678901234567"}')
    assert decode_json(text) == {"big": "123456789012345678901234567890",
                                 "neg": "-9223372036854775809", "u64": 18446744073709551615,
                                 "long": "0.12345678901234567890123", "ok": 1.25,
                                 "huge": "1e400", "phone": "12345678901234567"}


def test_json_with_non_utf8_bytes_is_escaped() -> None:
    text = b'{"k\xff": "v\xfe"}'.decode("utf-8", "surrogateescape")
    assert decode_json(text) == {"k\\xff": "v\\xfe"}


def test_json_rejects_garbage() -> None:
    with pytest.raises(CodecError, match="json"):
        decode_json("{nope")
    with pytest.raises(CodecError, match="json"):
        decode_json("NaN")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=12)


@given(json_values)
def test_json_round_trips_every_number_exactly(value: object) -> None:
    assert_same_json(decode_json(json.dumps(value)), value)


def assert_same_json(decoded: object, original: object) -> None:
    """Equal, numbers by exact decimal value (an exact string stands for a big number)."""
    if isinstance(original, bool) or original is None or isinstance(original, str):
        assert decoded == original
    elif isinstance(original, int | float):
        assert not isinstance(decoded, bool)
        assert isinstance(decoded, int | float | str)
        shown = decoded if isinstance(decoded, str) else repr(decoded)
        assert Decimal(shown) == Decimal(repr(original))
        if isinstance(decoded, str):  # only what a double or a 64-bit integer cannot hold
            assert not -(1 << 63) <= Decimal(shown) < 1 << 64 or isinstance(original, float)
    elif isinstance(original, list):
        assert isinstance(decoded, list) and len(decoded) == len(original)
        for item, expected in zip(decoded, original, strict=True):
            assert_same_json(item, expected)
    else:
        assert isinstance(original, dict) and isinstance(decoded, dict)
        assert decoded.keys() == original.keys()
        for key, expected in original.items():
            assert_same_json(decoded[key], expected)


def test_json_nested_too_deeply_is_a_codec_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(CodecError, match="json"):
        decode_json(deep)
