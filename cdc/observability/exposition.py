"""The capture and health series of ``/metrics``, collected at scrape time.

    distributary_capture_events_total{topic}      events the stream appended, per topic
    distributary_capture_streaming                1 while a replication session streams
    distributary_capture_active                   1 while this replica streams the slot
                                                  (0: a standby, or starting)
    distributary_capture_takeovers_total          sessions begun after another replica's
    distributary_capture_takeover_seconds         histogram: from the previous replica's
                                                  last sign of life until streaming
    distributary_capture_acknowledged_lsn         flush position acknowledged (bytes)
    distributary_capture_server_wal_lsn           the server's current WAL position (bytes)
    distributary_capture_lag_bytes                server WAL position - acknowledged position
    distributary_capture_lag_seconds              now - commit time of the last transaction
                                                  appended (0 once all received is acked)
    distributary_slot_retained_wal_bytes{slot}    WAL the slot makes the server keep
    distributary_connector_running{connector}     1 while the connector runs (retrying
                                                  its sink included)
    distributary_ready                            1 when /healthz answers 200

The connector families (``distributary_connector_*``) come from the same registry.
Events/s per topic: ``rate(distributary_capture_events_total[1m])``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .health import PartHealth
from .probes import CaptureProbe, ConnectorsProbe

P = "distributary_"
RUNNING_STATES = ("running", "retrying")  # a connector retrying its sink still runs
TAKEOVER_BUCKETS = (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0)


def _takeovers(seconds: tuple[float, ...]) -> Iterable[Metric]:
    yield CounterMetricFamily(f"{P}capture_takeovers", "Sessions this replica began after "
                              "another one held the slot.", value=float(len(seconds)))
    buckets = [(str(bound), float(sum(1 for s in seconds if s <= bound)))
               for bound in TAKEOVER_BUCKETS] + [("+Inf", float(len(seconds)))]
    yield HistogramMetricFamily(
        f"{P}capture_takeover_seconds", "From the previous replica's last sign of life "
        "until this one streamed.", buckets=buckets, sum_value=sum(seconds))


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{P}{name}", doc, value=value)


class StatusCollector(Collector):
    """Collects the capture and health series from the probes (either may be absent)."""

    def __init__(self, capture: CaptureProbe | None, slot: str | None,
                 connectors: ConnectorsProbe | None,
                 parts: Callable[[], list[PartHealth]]) -> None:
        self._capture = capture
        self._slot = slot
        self._connectors = connectors
        self._parts = parts

    def collect(self) -> Iterable[Metric]:
        """The families, from the probes' current readings."""
        if self._capture is not None:
            yield from self._capture_families()
        if self._connectors is not None:
            running = GaugeMetricFamily(f"{P}connector_running",
                                        "1 while the connector runs.", labels=["connector"])
            for part in self._connectors.health():
                running.add_metric([part.name.removeprefix("connector ")],
                                   1.0 if part.state in RUNNING_STATES else 0.0)
            yield running
        parts = self._parts()
        yield _gauge("ready", "1 when /healthz answers 200.",
                     1.0 if parts and all(part.ready for part in parts) else 0.0)

    def _capture_families(self) -> Iterable[Metric]:
        assert self._capture is not None
        reading = self._capture.reading(time.time())
        events = CounterMetricFamily(f"{P}capture_events",
                                     "Events the capture's stream appended to the log.",
                                     labels=["topic"])
        for topic, count in sorted(reading.events_by_topic.items()):
            events.add_metric([topic], float(count))
        yield events
        fallbacks = CounterMetricFamily(
            f"{P}capture_decode_fallbacks", "Values a codec could not read, kept as "
            "PostgreSQL's text (the event lists the column in \"unparsed\").",
            labels=["table", "column"])
        for (table, column), count in sorted(reading.decode_fallbacks.items()):
            fallbacks.add_metric([table, column], float(count))
        yield fallbacks
        yield _gauge("capture_streaming", "1 while a replication session streams.",
                     1.0 if reading.streaming else 0.0)
        yield _gauge("capture_active", "1 while this replica streams the slot (0: a "
                     "standby, or starting).", 1.0 if reading.streaming else 0.0)
        yield from _takeovers(reading.takeover_seconds)
        yield _gauge("capture_acknowledged_lsn",
                     "The flush position acknowledged to PostgreSQL, as a byte position.",
                     float(reading.acked_lsn))
        if reading.server_lsn is not None:
            yield _gauge("capture_server_wal_lsn", "The server's current WAL position.",
                         float(reading.server_lsn))
        if reading.lag_bytes is not None:
            yield _gauge("capture_lag_bytes",
                         "WAL bytes between the server's position and the acknowledged one.",
                         float(reading.lag_bytes))
        if reading.lag_seconds is not None:
            yield _gauge("capture_lag_seconds", "Seconds since the commit of the last "
                         "transaction appended (0 once everything received is acknowledged).",
                         reading.lag_seconds)
        if reading.retained_bytes is not None:
            retained = GaugeMetricFamily(f"{P}slot_retained_wal_bytes",
                                         "WAL the replication slot makes the server keep.",
                                         labels=["slot"])
            retained.add_metric([self._slot or ""], float(reading.retained_bytes))
            yield retained
