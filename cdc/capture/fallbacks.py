"""Values a codec could not read, kept as PostgreSQL's text instead of stopping the capture.

Such a value goes into the event unchanged (the text PostgreSQL wrote) and its column
into the event's ``unparsed`` list; each is counted per ``(table, column)`` (the metric
``distributary_capture_decode_fallbacks_total``) and logged as a warning naming the table,
the column, the type's complaint and the LSN — at most once a minute per column, with how
many were kept as text since.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

from .codecs import CodecError
from .lsn import format_lsn

log = logging.getLogger(__name__)

WARN_EVERY_S = 60.0


class DecodeFallbacks:
    """Counts of values kept as text, per ``(schema.table, column)``; thread-safe."""

    def __init__(self, *, warn_every_s: float = WARN_EVERY_S) -> None:
        """``warn_every_s``: the least time between two warnings about one column."""
        self.counts: Counter[tuple[str, str]] = Counter()
        self._last_warned: dict[tuple[str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()
        self._warn_every_s = warn_every_s

    def record(self, table: str, column: str, lsn: int, reason: Exception) -> None:
        """Count one value of ``table.column`` kept as text; warn (rate-limited)."""
        key = (table, column)
        now = time.monotonic()
        with self._lock:
            self.counts[key] += 1
            total = self.counts[key]
            warned_at, warned_total = self._last_warned.get(key, (-self._warn_every_s, 0))
            if now - warned_at < self._warn_every_s:
                return
            self._last_warned[key] = (now, total)
        # a CodecError never names the value; other errors might, so only their type
        why = str(reason) if isinstance(reason, CodecError) else type(reason).__name__
        log.warning("a value of %s column %s at %s could not be decoded (%s): kept as "
                    "PostgreSQL's text and listed in the event's \"unparsed\" (%d such values "
                    "since the last warning)", table, column, format_lsn(lsn), why,
                    total - warned_total, extra={"lsn": format_lsn(lsn)})

    def snapshot(self) -> dict[tuple[str, str], int]:
        """A copy of the counts (for metrics)."""
        with self._lock:
            return dict(self.counts)


FALLBACKS = DecodeFallbacks()
"""The process's counts: every capture path (stream, snapshots) records here."""
