"""Interval codec: PostgreSQL's ISO-8601 form, one sign per component."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.capture.codecs import CodecError, decode_interval

HOUR, MINUTE, SECOND = 3_600_000_000, 60_000_000, 1_000_000


def _trunc_div(a: int, b: int) -> int:
    """C integer division (toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def postgres_style(months: int, days: int, micros: int) -> str:
    """An interval as PostgreSQL writes it with IntervalStyle=postgres (EncodeInterval)."""
    year = _trunc_div(months, 12)
    mon = months - year * 12
    hour = _trunc_div(micros, HOUR)
    rest = micros - hour * HOUR
    minute = _trunc_div(rest, MINUTE)
    rest -= minute * MINUTE
    sec = _trunc_div(rest, SECOND)
    fsec = rest - sec * SECOND
    parts: list[str] = []
    is_zero, is_before = True, False
    for value, unit in ((year, "year"), (mon, "mon"), (days, "day")):
        if value:
            plus = "+" if is_before and value > 0 else ""
            parts.append(f"{plus}{value} {unit}{'' if value == 1 else 's'}")
            is_zero, is_before = False, value < 0
    if is_zero or hour or minute or sec or fsec:
        minus = hour < 0 or minute < 0 or sec < 0 or fsec < 0
        sign = "-" if minus else "+" if is_before else ""
        fraction = f".{abs(fsec):06d}".rstrip("0") if fsec else ""
        parts.append(f"{sign}{abs(hour):02d}:{abs(minute):02d}:{abs(sec):02d}{fraction}")
    return " ".join(parts)


_ISO = re.compile(r"P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)D)?"
                  r"(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?)(\d+)(?:\.(\d+))?S)?)?")


def parse_iso(text: str) -> tuple[int, int, int]:
    """(months, days, microseconds) of an ISO-8601 duration with per-component signs."""
    match = _ISO.fullmatch(text)
    assert match is not None, text
    years, months, days, hours, minutes, sign, secs, fraction = match.groups()
    micros = int(secs or 0) * SECOND + int((fraction or "").ljust(6, "0"))
    return (int(years or 0) * 12 + int(months or 0), int(days or 0),
            int(hours or 0) * HOUR + int(minutes or 0) * MINUTE + (-micros if sign else micros))


@pytest.mark.parametrize(("text", "expected"), [
    ("1 year 2 mons 3 days 04:05:06.5", "P1Y2M3DT4H5M6.5S"),
    ("-1 years -2 mons +3 days -04:05:06.5", "P-1Y-2M3DT-4H-5M-6.5S"),
    ("00:00:00", "PT0S"),
    ("1 day", "P1D"),
    ("-00:00:00.000001", "PT-0.000001S"),
    ("-1 days +00:00:01", "P-1DT1S"),
    ("1 mon -00:01:00", "P1MT-1M"),
    ("1000000:00:00", "PT1000000H"),
    ("P1Y2M3DT4H5M6.5S", "P1Y2M3DT4H5M6.5S"),
    ("infinity", "infinity"),
    ("-infinity", "-infinity"),
])
def test_interval(text: str, expected: str) -> None:
    assert decode_interval(text) == expected


@pytest.mark.parametrize("text", ["", "@ 1 year ago", "1-2 3 4:05:06", "1 fortnight"])
def test_unsupported_styles_name_the_setting(text: str) -> None:
    with pytest.raises(CodecError, match="IntervalStyle"):
        decode_interval(text)


@given(st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-(1 << 31), (1 << 31) - 1),
       st.integers(-(1 << 62), 1 << 62))
def test_every_interval_keeps_its_three_parts(months: int, days: int, micros: int) -> None:
    iso = decode_interval(postgres_style(months, days, micros))
    assert parse_iso(iso) == (months, days, micros)
