"""Composite types and ranges: both write their parts as a delimited list of fields that
are quoted when needed, ``"`` and ``\\`` doubled inside quotes (``record_out``,
``range_out``), and a field left empty means NULL (a record attribute) or no bound (a
range).

- composite ``(1,"b c",)`` → ``{"a": 1, "b": "b c", "c": null}``, attributes decoded by
  their own types' codecs;
- range ``[1,10)`` → ``{"lower": 1, "upper": 10, "lower_inc": true, "upper_inc": false,
  "empty": false}``; an unbounded side is ``null`` with ``*_inc`` false; ``empty`` →
  both bounds null, both ``*_inc`` false, ``"empty": true``;
- multirange ``{[1,3),[5,7)}`` → a list of such range objects (``{}`` → ``[]``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .base import Codec, CodecError, JSONValue, unescape_quoted


class AttributeCountError(CodecError):
    """A composite value with more or fewer attributes than its codec's type: the value
    was written under another shape of the type, or the type was altered since the codec
    was built (the capture then reads the type again)."""

_CHUNK = re.compile(r'"((?:[^"\\]|\\.|"")*)"|([^,()"\\]+)|\\(.)', re.S)
_RANGE = re.compile(r'\s*([\[(](?:"(?:[^"\\]|\\.|"")*"|[^"\\\])\]]|\\.)*[\])])\s*(,|$)', re.S)
_EMPTY_RANGE: dict[str, JSONValue] = {"lower": None, "upper": None, "lower_inc": False,
                                      "upper_inc": False, "empty": True}


def split_fields(text: str, start: int, stop: int, what: str) -> list[str | None]:
    """The comma-separated fields of ``text[start:stop]``; an empty field is None."""
    fields: list[str | None] = []
    pos = start
    while True:
        parts: list[str] = []
        quoted = False
        while pos < stop and text[pos] != ",":
            match = _CHUNK.match(text, pos, stop)
            if match is None:
                raise CodecError(what, f"unexpected character at {pos}")
            quoted_part, plain, escaped = match.groups()
            if quoted_part is not None:
                parts.append(unescape_quoted(quoted_part))
                quoted = True
            else:
                parts.append(plain if plain is not None else escaped)
            pos = match.end()
        fields.append("".join(parts) if parts or quoted else None)
        if pos >= stop:
            return fields
        pos += 1


def composite_codec(attributes: Sequence[tuple[str, Codec]]) -> Codec:
    """A codec for a composite type with these (name, codec) attributes, in order."""
    names = tuple(name for name, _ in attributes)
    codecs = tuple(codec for _, codec in attributes)

    def decode_composite(text: str) -> JSONValue:
        if len(text) < 2 or text[0] != "(" or text[-1] != ")":
            raise CodecError("composite", "expected (…)")
        if not names and text == "()":
            return {}
        fields = split_fields(text, 1, len(text) - 1, "composite")
        if len(fields) != len(names):
            raise AttributeCountError("composite", f"{len(fields)} attributes, the type "
                                                   f"has {len(names)}")
        return {name: None if value is None else codec(value)
                for name, codec, value in zip(names, codecs, fields, strict=True)}

    return decode_composite


@dataclass(frozen=True, slots=True)
class RangeCodec:
    """The codec of a range type whose bounds ``subtype`` decodes (what the native core
    reads to take such a column itself)."""

    subtype: Codec

    def __call__(self, text: str) -> JSONValue:
        return parse_range(text, self.subtype)


def range_codec(subtype: Codec) -> Codec:
    """A codec for a range type whose bounds ``subtype`` decodes."""
    return RangeCodec(subtype)


def parse_range(text: str, subtype: Codec) -> dict[str, JSONValue]:
    """One range literal as ``range_out`` writes it."""
    if text == "empty":
        return dict(_EMPTY_RANGE)
    if len(text) < 3 or text[0] not in "[(" or text[-1] not in "])":
        raise CodecError("range", "expected [lower,upper) or empty")
    fields = split_fields(text, 1, len(text) - 1, "range")
    if len(fields) != 2:
        raise CodecError("range", f"{len(fields)} bounds, expected 2")
    lower, upper = fields
    return {"lower": None if lower is None else subtype(lower),
            "upper": None if upper is None else subtype(upper),
            "lower_inc": lower is not None and text[0] == "[",
            "upper_inc": upper is not None and text[-1] == "]",
            "empty": False}


def multirange_codec(subtype: Codec) -> Codec:
    """A codec for a multirange whose ranges' bounds ``subtype`` decodes."""

    def decode_multirange(text: str) -> JSONValue:
        if len(text) < 2 or text[0] != "{" or text[-1] != "}":
            raise CodecError("multirange", "expected {…}")
        ranges: list[JSONValue] = []
        pos, stop = 1, len(text) - 1
        while pos < stop:
            match = _RANGE.match(text, pos, stop)
            if match is None:
                raise CodecError("multirange", f"unexpected character at {pos}")
            ranges.append(parse_range(match.group(1), subtype))
            pos = match.end()
            if match.group(2) == "," and pos >= stop:
                raise CodecError("multirange", "trailing delimiter")
        return ranges

    return decode_multirange
