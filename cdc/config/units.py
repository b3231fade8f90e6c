"""Durations (``30s``, ``1h30m``, ``7d``) and sizes (``500MB``, ``10GiB``) as typed values.

Pure functions, no pydantic: :mod:`cdc.config.fields` wraps them into field types.
``forever`` is spelled out for retention settings and parsed to ``None``.
"""

from __future__ import annotations

import re
from datetime import timedelta

FOREVER = "forever"

DURATION_UNITS: dict[str, timedelta] = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
}

SIZE_UNITS: dict[str, int] = {
    "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}

DURATION_EXAMPLES = "'500ms', '30s', '5m', '12h', '7d' or '1h30m'"
SIZE_EXAMPLES = "'512KiB', '500MB', '10GiB' or a number of bytes"

_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)\s*", re.IGNORECASE)


def parse_duration(text: str) -> timedelta:
    """Parse ``'30s'``, ``'1h30m'``, ``'1.5h'``, ``'250ms'`` into a ``timedelta``.

    A lowercase unit is required: a bare ``'10'`` (or ``'10M'``) is ambiguous, so rejected.
    """
    if not isinstance(text, str):
        raise ValueError(f"expected a duration like {DURATION_EXAMPLES}")
    position, total, stripped = 0, timedelta(0), text.strip()
    if not stripped:
        raise ValueError(f"expected a duration like {DURATION_EXAMPLES}")
    while position < len(stripped):
        match = _DURATION_PART.match(stripped, position)
        if match is None:
            raise ValueError(f"expected a duration like {DURATION_EXAMPLES}")
        total += float(match.group(1)) * DURATION_UNITS[match.group(2)]
        position = match.end()
    return total


def parse_size(value: str | int) -> int:
    """Parse ``'500MB'`` (powers of 1000), ``'10GiB'`` (powers of 1024) or an int into bytes."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"expected a size like {SIZE_EXAMPLES}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("expected a size of zero bytes or more")
        return value
    if value.strip().isdigit():
        return int(value.strip())
    match = _SIZE.fullmatch(value)
    if match is None:
        raise ValueError(f"expected a size like {SIZE_EXAMPLES}")
    return int(float(match.group(1)) * SIZE_UNITS[match.group(2).lower()])


def parse_retention_time(text: str) -> timedelta | None:
    """Parse a retention duration; ``'forever'`` gives ``None`` (no limit)."""
    if isinstance(text, str) and text.strip().lower() == FOREVER:
        return None
    return parse_duration(text)


def parse_retention_size(value: str | int) -> int | None:
    """Parse a retention size; ``'forever'`` gives ``None`` (no limit)."""
    if isinstance(value, str) and value.strip().lower() == FOREVER:
        return None
    return parse_size(value)


def format_duration(value: timedelta) -> str:
    """Write a ``timedelta`` the way :func:`parse_duration` reads it (``'1h30m'``)."""
    milliseconds = round(value.total_seconds() * 1000)
    if milliseconds == 0:
        return "0s"
    parts: list[str] = []
    for unit in ("d", "h", "m", "s", "ms"):
        unit_ms = round(DURATION_UNITS[unit].total_seconds() * 1000)
        count, milliseconds = divmod(milliseconds, unit_ms)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def format_size(value: int) -> str:
    """Write a byte count with the largest binary unit that divides it (``'64MiB'``)."""
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        factor = SIZE_UNITS[unit.lower()]
        if value and value % factor == 0:
            return f"{value // factor}{unit}"
    return f"{value}B"
