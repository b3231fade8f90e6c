"""Writing one batch to a sink, isolating the events it refuses for good.

A write that fails for the whole batch with a terminal error (``WriteRefusedError``
from the ``Retrier``) is split in halves and each half written again, down to single
events: the refused ones become dead letters, the others are written. Sinks are
idempotent and monotonic (versions), so writing an event twice is harmless. During the
split, unexpected errors are not retried again: they already were on the whole batch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from connectors.contract import Sink, SinkEvent

from .dead_letter import DeadLetter
from .errors import WriteRefusedError, describe
from .retry import Retrier

log = logging.getLogger(__name__)


class BatchDelivery:
    """Writes batches to one sink through a ``Retrier``; returns what to dead-letter."""

    def __init__(self, sink: Sink, retrier: Retrier) -> None:
        self._sink = sink
        self._retrier = retrier

    def deliver(self, events: Sequence[SinkEvent]) -> list[DeadLetter]:
        """Write ``events``; the dead letters are the events refused for good."""
        return self._deliver(events, splitting=False)

    def _deliver(self, events: Sequence[SinkEvent], *, splitting: bool) -> list[DeadLetter]:
        if not events:
            return []
        try:
            result = self._retrier.call(f"write of {len(events)} events",
                                        lambda: self._sink.write(events),
                                        unexpected_attempts=1 if splitting else None)
        except WriteRefusedError as refused:
            if len(events) == 1:
                cause = refused.cause
                return [DeadLetter(events[0].message, describe(cause), type(cause).__name__)]
            log.warning("%s: the sink refused a batch of %d events (%s); splitting it to "
                        "isolate the bad ones", self._retrier.connector, len(events),
                        describe(refused.cause), extra={"connector": self._retrier.connector})
            middle = len(events) // 2
            return (self._deliver(events[:middle], splitting=True)
                    + self._deliver(events[middle:], splitting=True))
        return [DeadLetter(rejection.event.message, rejection.reason, "Rejection")
                for rejection in result.rejected]
