"""Writing one batch to a sink durably, isolating the events it refuses for good.

The connector's one retry layer: a batch is written then flushed as one action of the
``Retrier``, so a transient failure of either step writes the batch again (a sink's
flush may lose what it buffered). A flush that fails otherwise is the sink's trouble,
not the events': it is retried a few times, then stops the worker (never split).

A write that fails for the whole batch with a terminal error (``WriteRefusedError``
from the ``Retrier``) is split in halves and each half written again, down to single
events: the refused ones become dead letters, the others are written. Sinks are
idempotent and monotonic (versions), so writing an event twice is harmless. During the
split, unexpected errors are not retried again: they already were on the whole batch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from connectors.contract import Sink, SinkEvent, WriteResult

from .dead_letter import DeadLetter
from .errors import FlushFailedError, WriteRefusedError, describe
from .retry import Retrier, is_transient

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
        def write_durably() -> WriteResult:
            result = self._sink.write(events)
            try:
                self._sink.flush()
            except Exception as exc:
                if is_transient(exc):
                    raise  # retried: written and flushed again
                raise FlushFailedError(exc) from exc
            return result

        try:
            result = self._retrier.call(f"write of {len(events)} events", write_durably,
                                        unexpected_attempts=1 if splitting else None)
        except WriteRefusedError as refused:
            if isinstance(refused.cause, FlushFailedError):
                raise
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
