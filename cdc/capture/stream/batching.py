"""When the capture's group commit closes a batch: soon while live, big while catching up.

Live (the last commit seen is recent), a batch closes at ``events`` records or once its
first record waited ``max_age_s``: latency first. Catching up (the last commit seen lags
``backlog_lag_s`` or more behind the clock), a batch waits up to ``backlog_max_age_s`` and
fills up to ``backlog_events`` records or ``max_bytes`` of values: a bigger batch costs
fewer fsyncs and fewer writes per partition, and its records were late anyway. A batch
spread over many topics (each partition written costs an open, a write and a close of its
segment and a touch of its doorbell, whatever it holds) grows further, to
``events_per_topic`` records a topic, up to ``backlog_spread_events``: measured over 2,000
tables, such batches carry ~1.5 times the events per second of 20,000-record ones, while
a batch of a few topics was slower at 100,000 (more CPU per event in the capture and the
walsender).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter

from cdc.log import Record

_TOPIC, _VALUE = itemgetter(0), itemgetter(2)  # Record.topic, Record.value


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """The group commit's bounds (see the module's doc)."""

    events: int
    max_age_s: float
    backlog_lag_s: float
    backlog_max_age_s: float
    backlog_events: int
    max_bytes: int
    backlog_spread_events: int = 100_000
    events_per_topic: int = 50


class GroupCommit:
    """Decides, record by record, whether the batch being gathered is closed."""

    def __init__(self, limits: BatchLimits, clock_us: Callable[[], int]) -> None:
        self.limits = limits
        self._clock_us = clock_us  # now, in the commit timestamps' clock
        self._full_at = limits.events  # records at which ``full`` looks closer
        # the batch whose first ``_counted`` records' values add up to ``_bytes``, of
        # ``_topics``
        self._counted_in: Sequence[Record] | None = None
        self._counted = self._bytes = 0
        self._topics: set[str] = set()

    def catching_up(self, last_commit_us: int) -> bool:
        """The last commit seen (0: none yet) lags ``backlog_lag_s`` or more."""
        return bool(last_commit_us) and (
            self._clock_us() - last_commit_us >= self.limits.backlog_lag_s * 1e6)

    def due(self, age_s: float, last_commit_us: int) -> bool:
        """A batch whose first record waited ``age_s`` is closed."""
        limits = self.limits
        return age_s >= limits.max_age_s and (
            age_s >= limits.backlog_max_age_s or not self.catching_up(last_commit_us))

    def full(self, ready: Sequence[Record], last_commit_us: int) -> bool:
        """The batch holds enough records (cheap below ``events``; while catching up, the
        bytes and topics are added up once every quarter of ``events`` records)."""
        if len(ready) < self._full_at:
            return False
        limits = self.limits
        if len(ready) >= limits.backlog_spread_events or not self.catching_up(last_commit_us):
            return True
        self._count_new(ready)
        if self._bytes >= limits.max_bytes or len(ready) >= max(
                limits.backlog_events, len(self._topics) * limits.events_per_topic):
            return True
        self._full_at = len(ready) + max(1, limits.events // 4)
        return False

    def _count_new(self, ready: Sequence[Record]) -> None:
        """Add the records added since the last call to the batch's bytes and topics (the
        capture's batch is one list that only grows until ``closed``)."""
        if ready is not self._counted_in or len(ready) < self._counted:
            self._counted_in, self._counted, self._bytes = ready, 0, 0
            self._topics = set()
        new = ready[self._counted:]
        self._bytes += sum(map(len, map(_VALUE, new)))
        self._topics.update(map(_TOPIC, new))
        self._counted = len(ready)

    def closed(self) -> None:
        """The batch was flushed: the next one starts empty."""
        self._full_at = self.limits.events
        self._counted_in, self._counted, self._bytes = None, 0, 0
        self._topics = set()
