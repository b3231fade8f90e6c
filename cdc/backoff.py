"""Exponential backoff, the delays of the capture's reconnects, the supervisor's
restarts, catalog reads that race DDL and the connectors' retries.

The ``n``-th failure in a row waits ``first_s * 2**(n-1)`` seconds, never more than
``max_s``; ``full_jitter`` draws a delay anywhere from zero up to that. What is retried,
for how long, and what starts the count again is each caller's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """Delays that double from ``first_s`` up to ``max_s`` (seconds)."""

    first_s: float
    max_s: float

    def delay(self, attempt: int) -> float:
        """Seconds to wait after the ``attempt``-th failure in a row (1-based)."""
        try:
            grown = math.ldexp(self.first_s, max(0, attempt - 1))  # first_s * 2**(n-1)
        except OverflowError:  # doubled past any float, long after reaching the cap
            return float(self.max_s)
        return float(min(self.max_s, grown))

    def full_jitter(self, attempt: int, draw: float) -> float:
        """``delay(attempt)`` scaled by ``draw`` in [0, 1): anywhere from zero up to it."""
        return draw * self.delay(attempt)
