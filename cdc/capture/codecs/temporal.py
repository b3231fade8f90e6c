"""Codecs of date, time, timetz, timestamp and timestamptz: ISO-8601 strings.

They read PostgreSQL's output with ``DateStyle=ISO`` (the server default, ``ISO, MDY``);
any other DateStyle raises ``CodecError`` naming the setting to fix.

Representation (proleptic Gregorian, as PostgreSQL computes):

- ``timestamp`` → ``2024-03-15T12:00:00.5``; ``date`` → ``2024-03-15``.
- ``timestamptz`` → normalised to UTC with ``Z``: ``2024-03-15T11:00:00.5Z`` (whatever
  TimeZone the server used, including offsets with seconds such as LMT ``+00:53:28``).
- ``infinity`` / ``-infinity`` stay those strings.
- Years before 1 AD use ISO-8601 astronomical numbering with a sign: 1 BC is ``0000``,
  ``0044-03-15 BC`` is ``-0043-03-15``. Years after 9999 carry a ``+``: ``+10000-01-01``.
  Nothing is lost, and ``datetime.fromisoformat`` still reads every year 1..9999.
- ``time`` stays ``HH:MM:SS[.ffffff]`` (``24:00:00`` included); ``timetz`` keeps its own
  offset, written ``±HH:MM`` (``±HH:MM:SS`` if it has seconds): a time of day has no date
  to normalise across midnight with.
- Fractional seconds are kept digit for digit (PostgreSQL drops trailing zeros).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .base import CodecError

_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_DATE = re.compile(r"([0-9]{4,})-([0-9]{2})-([0-9]{2})( BC)?")
_TIMESTAMP = re.compile(
    r"([0-9]{4,})-([0-9]{2})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(?:([+-])([0-9]{2})(?::([0-9]{2}))?(?::([0-9]{2}))?)?( BC)?")
_TIMETZ = re.compile(r"([0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?)([+-])([0-9]{2})"
                     r"(?::([0-9]{2}))?(?::([0-9]{2}))?")
_INFINITIES = ("infinity", "-infinity")
_DATESTYLE = "expected DateStyle=ISO output (set DateStyle to ISO for the replication session)"


def decode_date(text: str) -> str:
    """``date`` → ``YYYY-MM-DD`` (see the module docstring for BC and large years)."""
    if len(text) == 10 and text[4] == "-" and text[7] == "-":
        return text
    if text in _INFINITIES:
        return text
    match = _DATE.fullmatch(text)
    if match is None:
        raise CodecError("date", _DATESTYLE)
    year, month, day, bc = match.groups()
    return f"{_year(int(year), bc is not None)}-{month}-{day}"


def decode_timestamp(text: str) -> str:
    """``timestamp`` → ``YYYY-MM-DDTHH:MM:SS[.ffffff]``."""
    if len(text) >= 19 and text[10] == " " and text[4] == "-" and text[-1] != "C":
        return f"{text[:10]}T{text[11:]}"
    if text in _INFINITIES:
        return text
    match = _TIMESTAMP.fullmatch(text)
    if match is None or match.group(8) is not None:
        raise CodecError("timestamp", _DATESTYLE)
    year, month, day, hour, minute, second, fraction = match.group(1, 2, 3, 4, 5, 6, 7)
    return (f"{_year(int(year), match.group(12) is not None)}-{month}-{day}"
            f"T{hour}:{minute}:{second}{fraction or ''}")


def decode_timestamptz(text: str) -> str:
    """``timestamptz`` → UTC ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``."""
    if text[-3:] == "+00" and len(text) >= 22 and text[10] == " " and text[4] == "-":
        return f"{text[:10]}T{text[11:-3]}Z"
    if text in _INFINITIES:
        return text
    match = _TIMESTAMP.fullmatch(text)
    if match is None or match.group(8) is None:
        raise CodecError("timestamptz", _DATESTYLE)
    (year, month, day, hour, minute, second, fraction, sign, off_h, off_m, off_s,
     bc) = match.groups()
    offset = int(off_h) * 3600 + int(off_m or 0) * 60 + int(off_s or 0)
    astronomical = 1 - int(year) if bc else int(year)
    seconds = (days_from_civil(astronomical, int(month), int(day)) * 86400
               + int(hour) * 3600 + int(minute) * 60 + int(second))
    seconds += -offset if sign == "+" else offset
    days, seconds = divmod(seconds, 86400)
    y, m, d = civil_from_days(days)
    hh, rest = divmod(seconds, 3600)
    return (f"{_astronomical_year(y)}-{m:02d}-{d:02d}T{hh:02d}:{rest // 60:02d}:"
            f"{rest % 60:02d}{fraction or ''}Z")


def decode_timetz(text: str) -> str:
    """``timetz`` → ``HH:MM:SS[.ffffff]±HH:MM`` (its own offset kept)."""
    match = _TIMETZ.fullmatch(text)
    if match is None:
        raise CodecError("timetz", "expected HH:MM:SS[.ffffff]±HH[:MM[:SS]]")
    time, sign, hours, minutes, seconds = match.groups()
    return f"{time}{sign}{hours}:{minutes or '00'}{':' + seconds if seconds else ''}"


def pg_micros_to_iso(micros: int) -> str:
    """Microseconds since 2000-01-01 UTC (pgoutput's clock) → ``…T…:…:….ffffffZ``."""
    moment = _PG_EPOCH + timedelta(microseconds=micros)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _year(year: int, bc: bool) -> str:
    return _astronomical_year(1 - year if bc else year)


def _astronomical_year(year: int) -> str:
    if year < 0:
        return f"-{-year:04d}"
    if year > 9999:
        return f"+{year}"
    return f"{year:04d}"


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (astronomical year numbering)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """The inverse of ``days_from_civil``."""
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (month <= 2), month, day
