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


def message_commit_lsn(lsn: int) -> int:
    """The commit LSN that numbers what a non-transactional logical decoding message at
    ``lsn`` brings to the log (its event, or the rows of an incremental snapshot chunk).

    PostgreSQL reports such a message at the *end* of its WAL record, where the next
    record begins — which may be the commit of a transaction, whose events are numbered
    ``(that LSN, 0…)``. One byte earlier is still inside the message's own record: after
    the commit of every transaction sent before the message, before every one sent after.
    """
    return lsn - 1
