"""Codecs of the scalar built-in types: booleans, numbers, bytea and JSON.

- integers (int2/4/8, oid, xid, cid, xid8) stay JSON integers;
- ``numeric`` keeps every digit as a string (``"NaN"``, ``"Infinity"``, ``"-Infinity"``
  included), because no JSON reader keeps 40 digits;
- float4/float8 become JSON numbers; NaN and the infinities, which JSON lacks, become the
  strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
- ``bytea`` (hex or escape output) becomes standard base64 with padding;
- json/jsonb become nested JSON. A number that a double or a 64-bit integer cannot hold
  exactly (orjson would silently round it) is kept as a string of its exact digits, the
  way ``numeric`` is.
"""

from __future__ import annotations

import binascii
import json
import math
import re
from decimal import Decimal, InvalidOperation

import orjson

from .base import CodecError, JSONValue, decode_text

_FLOAT_SPECIALS = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity"}
_BYTEA_ESCAPE = re.compile(r"\\(\\|[0-7]{3})")
# A run of 16+ digits/dots: a number that may not survive a double (or int64) unchanged.
_LONG_NUMBER = re.compile(r"[0-9][0-9.]{15,}")
_INT_MIN, _UINT_MAX = -(1 << 63), (1 << 64) - 1


def decode_bool(text: str) -> bool:
    """``t`` / ``f`` → true / false."""
    if text == "t":
        return True
    if text == "f":
        return False
    raise CodecError("boolean", "expected 't' or 'f'")


_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # int8 .. xid8: what a JSON encoder takes


def decode_int(text: str) -> int:
    """An integer type's text → a JSON integer (from -2^63 to 2^64 - 1)."""
    try:
        value = int(text)
    except ValueError:
        raise CodecError("integer", "not a decimal integer") from None
    if not _INT_MIN <= value <= _INT_MAX:
        raise CodecError("integer", "outside the 64-bit range")
    return value


def decode_float(text: str) -> float | str:
    """float4/float8 → a JSON number, or ``"NaN"``/``"Infinity"``/``"-Infinity"``."""
    try:
        value = float(text)
    except ValueError:
        raise CodecError("floating-point", "not a number") from None
    if value - value == 0.0:  # finite
        return value
    special = _FLOAT_SPECIALS.get(text)
    if special is None:
        raise CodecError("floating-point", "expected NaN, Infinity or -Infinity")
    return special


def decode_numeric(text: str) -> str:
    """``numeric`` → its exact decimal text (``NaN``/``Infinity``/``-Infinity`` too)."""
    return text  # numeric_out writes exactly this; the hot path does not re-check it


def decode_bytea(text: str) -> str:
    """``bytea`` in hex (``\\x…``) or escape output → base64."""
    try:
        if text.startswith("\\x"):
            raw = bytes.fromhex(text[2:])
        else:
            raw = _BYTEA_ESCAPE.sub(_unescape_byte, text).encode("latin-1")
            if "\\" in _BYTEA_ESCAPE.sub("", text):
                raise ValueError("stray backslash")
    except (ValueError, UnicodeEncodeError):
        raise CodecError("bytea", "expected hex (\\x…) or escape output") from None
    return binascii.b2a_base64(raw, newline=False).decode("ascii")


def _unescape_byte(match: re.Match[str]) -> str:
    escape = match.group(1)
    return "\\" if escape == "\\" else chr(int(escape, 8))


def decode_json(text: str) -> JSONValue:
    """json/jsonb → nested JSON, numbers kept exactly (see the module docstring)."""
    if _LONG_NUMBER.search(text) is None:
        try:
            value: JSONValue = orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # e.g. 1e400 in a json (not jsonb) value: the careful path decides
        else:
            return value  # orjson refuses lone surrogates, so its strings are clean
    try:
        return _clean_json(json.loads(text, parse_int=_exact_int, parse_float=_exact_float,
                                      parse_constant=_no_constant))
    except ValueError:
        raise CodecError("json", "not a JSON document") from None
    except RecursionError:
        raise CodecError("json", "nested too deeply to decode") from None


def _exact_int(text: str) -> int | str:
    value = int(text)
    return value if _INT_MIN <= value <= _UINT_MAX else text


def _exact_float(text: str) -> float | str:
    value = float(text)
    try:
        if math.isfinite(value) and Decimal(repr(value)) == Decimal(text):
            return value
    except InvalidOperation:
        pass
    return text


def _no_constant(text: str) -> None:
    raise ValueError(f"{text} is not JSON")


def _clean_json(value: JSONValue) -> JSONValue:
    """Apply ``decode_text`` to every string and key (only needed for non-ASCII input)."""
    if isinstance(value, str):
        return decode_text(value)
    if isinstance(value, list):
        return [_clean_json(item) for item in value]
    if isinstance(value, dict):
        return {decode_text(key): _clean_json(item) for key, item in value.items()}
    return value
