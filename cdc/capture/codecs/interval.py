"""The ``interval`` codec: an ISO-8601 duration, exactly as PostgreSQL writes one with
``IntervalStyle=iso_8601``.

A PostgreSQL interval has three independent signed parts — months, days, microseconds —
so a single leading sign cannot represent it. Each component carries its own sign, the
way PostgreSQL's own ISO output (which it reads back) does: ``-1 years -2 mons +3 days
-04:05:06.5`` → ``P-1Y-2M3DT-4H-5M-6.5S``. Zero is ``PT0S``; ``infinity``/``-infinity``
(PostgreSQL 17) stay those strings. Years and months come from the month count (12 months
are a year), hours/minutes/seconds from the microseconds; days are never folded into
months or hours, so nothing is lost.

Input may be the server's default ``IntervalStyle=postgres`` output (parsed and rewritten)
or ``iso_8601`` output (returned as is). ``sql_standard`` and ``postgres_verbose`` raise
``CodecError`` naming the setting.
"""

from __future__ import annotations

import re

from .base import CodecError

_POSTGRES = re.compile(
    r"(?:([+-]?[0-9]+) years? ?)?(?:([+-]?[0-9]+) mons? ?)?(?:([+-]?[0-9]+) days? ?)?"
    r"(?:([+-])?([0-9]+):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?)?")
_STYLE = "expected IntervalStyle postgres or iso_8601 output"


def decode_interval(text: str) -> str:
    """``interval`` text → ISO-8601 duration with per-component signs."""
    if text[:1] == "P" or text in ("infinity", "-infinity"):
        return text
    match = _POSTGRES.fullmatch(text)
    if match is None or not text:
        raise CodecError("interval", _STYLE)
    years, months, days, sign, hours, minutes, seconds, fraction = match.groups()
    negative = sign == "-"
    return iso_duration(int(years or 0), int(months or 0), int(days or 0),
                        _signed(hours, negative), _signed(minutes, negative),
                        _signed(seconds, negative), (fraction or "").rstrip("0"), negative)


def iso_duration(years: int, months: int, days: int, hours: int, minutes: int,
                 seconds: int, fraction: str = "", negative_seconds: bool = False) -> str:
    """PostgreSQL's ISO-8601 interval text from its fields (``fraction``: the digits after
    the decimal point of the seconds, no trailing zeros)."""
    if not (years or months or days or hours or minutes or seconds or fraction):
        return "PT0S"
    out = ["P"]
    if years:
        out.append(f"{years}Y")
    if months:
        out.append(f"{months}M")
    if days:
        out.append(f"{days}D")
    if hours or minutes or seconds or fraction:
        out.append("T")
        if hours:
            out.append(f"{hours}H")
        if minutes:
            out.append(f"{minutes}M")
        if seconds or fraction:
            sign = "-" if negative_seconds or seconds < 0 else ""
            out.append(f"{sign}{abs(seconds)}{'.' + fraction if fraction else ''}S")
    return "".join(out)


def _signed(digits: str | None, negative: bool) -> int:
    value = int(digits or 0)
    return -value if negative else value
