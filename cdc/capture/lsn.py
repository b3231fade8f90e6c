"""PostgreSQL log sequence numbers: 64-bit integers written as ``XXXXXXXX/XXXXXXXX``."""

from __future__ import annotations

import re

_LSN = re.compile(r"^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})$")


def parse_lsn(text: str) -> int:
    """``'0/16B3748'`` → ``23803720``; raises ValueError naming the bad text."""
    match = _LSN.match(text.strip())
    if match is None:
        raise ValueError(f"not an LSN: {text!r} (expected e.g. '0/16B3748')")
    return (int(match.group(1), 16) << 32) | int(match.group(2), 16)


def format_lsn(lsn: int) -> str:
    """``23803720`` → ``'0/16B3748'``."""
    if not 0 <= lsn < 1 << 64:
        raise ValueError(f"LSN out of range: {lsn}")
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"
