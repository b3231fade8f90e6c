"""The expected event value of a column, from PostgreSQL's own output, not our codecs.

The oracle session pins its own settings (ISO dates in UTC, ISO-8601 intervals, hex
bytea, shortest-exact floats), asks PostgreSQL for ``to_json(v)`` (or, for ranges,
``lower(v)``/``upper(v)``/``lower_inc(v)``/… built into JSON by ``json_build_object``),
reads that JSON keeping every number's exact text, and rewrites it into the event's
documented representation (README "Events"): integers as JSON integers, ``numeric`` as
its digits, floats as numbers or ``"NaN"``/``"Infinity"``, ``bytea`` as base64,
timestamps as ISO-8601 with astronomical years and ``Z``, ranges as objects.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

ORACLE_OPTIONS = ("-c TimeZone=UTC -c DateStyle=ISO,YMD -c IntervalStyle=iso_8601 "
                  "-c extra_float_digits=1 -c bytea_output=hex -c client_encoding=UTF8")

Convert = Callable[[Any], Any]


class Num(str):
    """A JSON number's exact text, as PostgreSQL wrote it."""


def parse(text: str) -> Any:
    """JSON text → Python, numbers kept as ``Num`` (their exact text)."""
    return json.loads(text, parse_int=Num, parse_float=Num, parse_constant=Num)


def integer(value: Any) -> Any:
    return int(value) if isinstance(value, str) else value  # to_json(oid) is a string


def floating(value: Any) -> Any:
    return float(value) if isinstance(value, Num) else value  # "NaN", "Infinity" stay


def numeric(value: Any) -> Any:
    return str(value) if isinstance(value, Num) else value


def same(value: Any) -> Any:
    return value


def bytea(value: Any) -> Any:
    assert isinstance(value, str) and value.startswith("\\x"), value
    return base64.b64encode(bytes.fromhex(value[2:])).decode()


_TEMPORAL = re.compile(r"([0-9]{4,})(-[0-9]{2}-[0-9]{2})(T[0-9:.]+)?([+-][0-9:]+)?( BC)?")


def _iso(value: Any, utc: bool) -> Any:
    if not isinstance(value, str) or value in ("infinity", "-infinity"):
        return value
    match = _TEMPORAL.fullmatch(value)
    assert match is not None, value
    year_text, month_day, clock, offset, bc = match.groups()
    year = 1 - int(year_text) if bc else int(year_text)
    if year < 0:
        year_out = f"-{-year:04d}"
    elif year > 9999:
        year_out = f"+{year}"
    else:
        year_out = f"{year:04d}"
    out = year_out + month_day + (clock or "")
    if utc:
        assert offset == "+00:00", value  # the oracle session runs in UTC
        out += "Z"
    return out


def timestamp(value: Any) -> Any:
    return _iso(value, utc=False)


def timestamptz(value: Any) -> Any:
    return _iso(value, utc=True)


def date(value: Any) -> Any:
    return _iso(value, utc=False)


def timetz(value: Any) -> Any:
    """``HH:MM:SS[.f]±HH[:MM[:SS]]`` → the offset always with minutes (``±HH:MM``)."""
    assert isinstance(value, str), value
    match = re.fullmatch(r"([0-9:.]+)([+-][0-9]{2})((?::[0-9]{2}){0,2})", value)
    assert match is not None, value
    clock, hours, rest = match.groups()
    return clock + hours + (rest or ":00")


def json_value(value: Any) -> Any:
    """A json/jsonb document: numbers a double or 64-bit integer holds exactly become
    JSON numbers, the others keep their exact text (README "Events")."""
    if isinstance(value, list):
        return [json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: json_value(item) for key, item in value.items()}
    if not isinstance(value, Num):
        return value
    if re.fullmatch(r"-?[0-9]+", value):
        number = int(value)
        return number if -(1 << 63) <= number <= (1 << 64) - 1 else str(value)
    try:
        as_float = float(value)
        if math.isfinite(as_float) and Decimal(repr(as_float)) == Decimal(value):
            return as_float
    except (ValueError, InvalidOperation):
        pass
    return str(value)


def array(element: Convert) -> Convert:
    def convert(value: Any) -> Any:
        if isinstance(value, list):
            return [convert(item) for item in value]
        return None if value is None else element(value)
    return convert


def composite(**attributes: Convert) -> Convert:
    def convert(value: Any) -> Any:
        assert isinstance(value, dict), value
        return {name: None if item is None else attributes[name](item)
                for name, item in value.items()}
    return convert


def range_of(bound: Convert) -> Convert:
    def convert(value: Any) -> Any:
        if isinstance(value, list):  # a multirange, an array of ranges
            return [None if item is None else convert(item) for item in value]
        return {**value, "lower": None if value["lower"] is None else bound(value["lower"]),
                "upper": None if value["upper"] is None else bound(value["upper"])}
    return convert


def equal(expected: Any, found: Any) -> bool:
    """Strict JSON equality: types must match (``True`` is not ``1``), ``-0.0`` is not
    ``0.0``."""
    if isinstance(expected, float) and isinstance(found, float):
        return expected == found and math.copysign(1, expected) == math.copysign(1, found)
    if type(expected) is not type(found):
        return False
    if isinstance(expected, list):
        return len(expected) == len(found) and all(map(equal, expected, found))
    if isinstance(expected, dict):
        return expected.keys() == found.keys() and all(equal(v, found[k])
                                                        for k, v in expected.items())
    return bool(expected == found)
