"""Per-connector Prometheus metrics, in a registry the caller owns.

All series carry a ``connector`` label; events/s is ``rate(…_events_written_total[1m])``.

    distributary_connector_messages_read_total     messages polled from the log
    distributary_connector_events_written_total    events the sink accepted (after coalescing)
    distributary_connector_batches_total           batches written, flushed and committed
    distributary_connector_retries_total           retried attempts (any action)
    distributary_connector_dead_letters_total      events sent to the dead-letter topic
    distributary_connector_dropped_total           events skipped by the ``drop`` policy
    distributary_connector_lag{topic,partition}    events behind the end of the partition
    distributary_connector_batch_seconds           write + flush + commit time per batch
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_PREFIX = "distributary_connector_"


class RuntimeMetrics:
    """The metric families of every connector, registered once in ``registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        labels = ("connector",)
        reg = self.registry
        self.messages_read = Counter(f"{_PREFIX}messages_read", "Messages polled from the log.",
                                     labels, registry=reg)
        self.events_written = Counter(f"{_PREFIX}events_written",
                                      "Events the sink accepted, after coalescing.", labels,
                                      registry=reg)
        self.batches = Counter(f"{_PREFIX}batches", "Batches written, flushed and committed.",
                               labels, registry=reg)
        self.retries = Counter(f"{_PREFIX}retries", "Retried attempts of any action.", labels,
                               registry=reg)
        self.dead_letters = Counter(f"{_PREFIX}dead_letters",
                                    "Events sent to the dead-letter topic.", labels,
                                    registry=reg)
        self.dropped = Counter(f"{_PREFIX}dropped", "Events skipped by the drop policy.",
                               labels, registry=reg)
        self.lag = Gauge(f"{_PREFIX}lag", "Events between the committed offset and the end.",
                         (*labels, "topic", "partition"), registry=reg)
        self.batch_seconds = Histogram(f"{_PREFIX}batch_seconds",
                                       "Write, flush and commit time of one batch.", labels,
                                       registry=reg)

    def for_connector(self, connector: str) -> ConnectorMetrics:
        """The series of one connector."""
        return ConnectorMetrics(self, connector)


class ConnectorMetrics:
    """One connector's children of the ``RuntimeMetrics`` families."""

    def __init__(self, families: RuntimeMetrics, connector: str) -> None:
        self.connector = connector
        self._families = families
        self.messages_read = families.messages_read.labels(connector)
        self.events_written = families.events_written.labels(connector)
        self.batches = families.batches.labels(connector)
        self.retries = families.retries.labels(connector)
        self.dead_letters = families.dead_letters.labels(connector)
        self.dropped = families.dropped.labels(connector)
        self.batch_seconds = families.batch_seconds.labels(connector)

    def set_lag(self, topic: str, partition: int, lag: int) -> None:
        """Record the lag of one partition."""
        self._families.lag.labels(self.connector, topic, str(partition)).set(lag)
