"""Date and time codecs: ISO-8601, timestamptz in UTC, BC and far-future years."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.capture.codecs import (
    CodecError,
    decode_date,
    decode_timestamp,
    decode_timestamptz,
    decode_timetz,
    pg_micros_to_iso,
)
from cdc.capture.codecs.temporal import civil_from_days, days_from_civil


@pytest.mark.parametrize(("text", "expected"), [
    ("2024-03-15", "2024-03-15"),
    ("0001-01-01", "0001-01-01"),
    ("0001-12-31 BC", "0000-12-31"),
    ("0044-03-15 BC", "-0043-03-15"),
    ("4714-11-24 BC", "-4713-11-24"),
    ("10000-01-01", "+10000-01-01"),
    ("5874897-12-31", "+5874897-12-31"),
    ("infinity", "infinity"),
    ("-infinity", "-infinity"),
])
def test_date(text: str, expected: str) -> None:
    assert decode_date(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("2024-03-15 12:34:56", "2024-03-15T12:34:56"),
    ("2024-03-15 12:34:56.5", "2024-03-15T12:34:56.5"),
    ("2024-03-15 12:34:56.000001", "2024-03-15T12:34:56.000001"),
    ("0044-03-15 12:00:00 BC", "-0043-03-15T12:00:00"),
    ("294276-12-31 23:59:59.999999", "+294276-12-31T23:59:59.999999"),
    ("infinity", "infinity"),
    ("-infinity", "-infinity"),
])
def test_timestamp(text: str, expected: str) -> None:
    assert decode_timestamp(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("2024-03-15 12:34:56+00", "2024-03-15T12:34:56Z"),
    ("2024-03-15 12:34:56.123456+00", "2024-03-15T12:34:56.123456Z"),
    ("2024-03-15 12:34:56+01", "2024-03-15T11:34:56Z"),
    ("2024-03-15 00:30:00+05:30", "2024-03-14T19:00:00Z"),
    ("2024-12-31 20:00:00-05", "2025-01-01T01:00:00Z"),
    ("1850-01-01 00:00:00+00:53:28", "1849-12-31T23:06:32Z"),
    ("0044-03-15 12:00:00+00 BC", "-0043-03-15T12:00:00Z"),
    ("0001-01-01 00:30:00+01", "0000-12-31T23:30:00Z"),
    ("0001-12-31 23:30:00-01 BC", "0001-01-01T00:30:00Z"),
    ("9999-12-31 23:30:00-01", "+10000-01-01T00:30:00Z"),
    ("infinity", "infinity"),
    ("-infinity", "-infinity"),
])
def test_timestamptz_normalised_to_utc(text: str, expected: str) -> None:
    assert decode_timestamptz(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("04:05:06+00", "04:05:06+00:00"),
    ("04:05:06.789-08", "04:05:06.789-08:00"),
    ("23:59:59+05:30", "23:59:59+05:30"),
    ("12:00:00+00:53:28", "12:00:00+00:53:28"),
    ("24:00:00-14", "24:00:00-14:00"),
])
def test_timetz_keeps_its_offset(text: str, expected: str) -> None:
    assert decode_timetz(text) == expected


@pytest.mark.parametrize("text", ["03/15/2024", "15.03.2024", "Fri Mar 15 2024"])
def test_non_iso_datestyle_is_refused_with_the_fix(text: str) -> None:
    with pytest.raises(CodecError, match="DateStyle"):
        decode_date(text)


def test_non_iso_timestamps_are_refused() -> None:
    with pytest.raises(CodecError, match="DateStyle"):
        decode_timestamp("03/15/2024 12:00:00")
    with pytest.raises(CodecError, match="DateStyle"):
        decode_timestamptz("Fri Mar 15 12:00:00 2024 UTC")
    with pytest.raises(CodecError, match="DateStyle"):
        decode_timestamptz("2024-03-15 12:00:00")  # no offset
    with pytest.raises(CodecError, match="timetz"):
        decode_timetz("04:05:06")


def test_commit_timestamp() -> None:
    assert pg_micros_to_iso(0) == "2000-01-01T00:00:00.000000Z"
    assert pg_micros_to_iso(-1) == "1999-12-31T23:59:59.999999Z"
    assert pg_micros_to_iso(848_570_400_123_456) == "2026-11-21T10:00:00.123456Z"


@given(st.integers(-3_000_000, 3_000_000))
def test_civil_day_arithmetic_round_trips(days: int) -> None:
    assert days_from_civil(*civil_from_days(days)) == days


@given(st.dates())
def test_civil_day_arithmetic_matches_the_gregorian_calendar(day: date) -> None:
    assert days_from_civil(day.year, day.month, day.day) == (day - date(1970, 1, 1)).days


def pg_timestamptz_text(moment: datetime) -> str:
    """How PostgreSQL (DateStyle ISO) writes a timestamptz in the moment's own offset."""
    offset = moment.utcoffset() or timedelta(0)
    seconds = int(offset.total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    zone = f"{sign}{hours:02d}" + (f":{minutes:02d}" if minutes or secs else "")
    zone += f":{secs:02d}" if secs else ""
    fraction = f".{moment.microsecond:06d}".rstrip("0").rstrip(".")
    return moment.strftime("%Y-%m-%d %H:%M:%S").rjust(19, "0") + fraction + zone


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
       st.integers(-15 * 3600, 15 * 3600))
def test_timestamptz_equals_python_utc_conversion(naive: datetime, offset: int) -> None:
    moment = naive.replace(tzinfo=timezone(timedelta(seconds=offset)))
    utc = pg_timestamptz_text(moment.astimezone(UTC))
    expected = utc.replace(" ", "T").removesuffix("+00") + "Z"
    assert decode_timestamptz(pg_timestamptz_text(moment)) == expected
