"""What the status page plots: one ``Sample`` per interval, kept in a ``SampleHistory``.

Pure data: the sampler fills it, ``/status.json`` serialises it. Throughput is the
difference of the capture's event counter between two samples over their time apart.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_WINDOW_S = 600.0


@dataclass(frozen=True, slots=True)
class Sample:
    """The readings taken at ``at`` (seconds since the epoch)."""

    at: float
    events: int | None = None  # streamed events appended so far; None: no capture here
    lag_bytes: int | None = None
    lag_seconds: float | None = None
    retained_bytes: int | None = None
    connector_lag: Mapping[str, int] = field(default_factory=dict)
    events_per_s: float | None = None  # filled in by SampleHistory.add

    def as_json(self) -> dict[str, Any]:
        """The sample as ``/status.json`` shows it."""
        return {"t": round(self.at, 3), "events": self.events,
                "events_per_s": None if self.events_per_s is None
                else round(self.events_per_s, 3),
                "lag_bytes": self.lag_bytes,
                "lag_seconds": None if self.lag_seconds is None else round(self.lag_seconds, 3),
                "retained_bytes": self.retained_bytes,
                "connector_lag": dict(self.connector_lag)}


def throughput(previous: Sample | None, current: Sample) -> float | None:
    """Events per second between two samples; None without two counts or if time stood
    still. A counter that went down (a restart) counts from zero."""
    if previous is None or previous.events is None or current.events is None:
        return None
    elapsed = current.at - previous.at
    if elapsed <= 0:
        return None
    grown = current.events - previous.events
    return (grown if grown >= 0 else current.events) / elapsed


class SampleHistory:
    """A ring buffer of the samples of the last ``window_s`` seconds."""

    def __init__(self, interval_s: float, window_s: float = DEFAULT_WINDOW_S) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.interval_s = interval_s
        self.window_s = window_s
        self._samples: deque[Sample] = deque(maxlen=max(2, int(window_s / interval_s) + 1))

    def add(self, sample: Sample) -> Sample:
        """Append ``sample`` with its throughput filled in; the oldest falls out."""
        previous = self._samples[-1] if self._samples else None
        rated = Sample(sample.at, sample.events, sample.lag_bytes, sample.lag_seconds,
                       sample.retained_bytes, sample.connector_lag,
                       throughput(previous, sample))
        self._samples.append(rated)
        return rated

    def samples(self) -> list[Sample]:
        """The samples kept, oldest first."""
        return list(self._samples)

    @property
    def latest(self) -> Sample | None:
        return self._samples[-1] if self._samples else None

    def as_json(self) -> dict[str, Any]:
        """``interval_s``, ``window_s`` and the samples, for ``/status.json``."""
        return {"interval_s": self.interval_s, "window_s": self.window_s,
                "samples": [sample.as_json() for sample in self.samples()]}
