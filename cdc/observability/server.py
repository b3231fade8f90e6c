"""``ObservabilityServer``: the endpoint of ``cdc run`` / ``capture`` / ``connect``.

It puts together the probes (capture, connectors), the sampler feeding the status page,
the Prometheus registry shared with the connector runtime, and the HTTP endpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry

from cdc.config.models import MetricsConfig

from .exposition import StatusCollector
from .health import PartHealth, readiness
from .plugin_metrics import PluginMetrics
from .probes import CaptureProbe, ConnectorsProbe
from .samples import Sample
from .serving import SampledEndpoint


class ObservabilityServer(SampledEndpoint):
    """Serves ``/metrics``, ``/healthz``, ``/status.json`` and the status page ``/``."""

    def __init__(self, config: MetricsConfig, registry: CollectorRegistry, *,
                 capture: CaptureProbe | None = None, slot: str | None = None,
                 connectors: ConnectorsProbe | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.capture = capture
        self.connectors = connectors
        self._clock = clock
        registry.register(StatusCollector(capture, slot, connectors, self.parts))
        if registry is not REGISTRY:  # sinks' own counters, kept in the default registry
            registry.register(PluginMetrics())
        super().__init__(config, registry, self.health, self.status, self._take_sample)

    def stop(self) -> None:
        """Stop serving and sampling; close the probe's connection."""
        super().stop()
        if self.capture is not None:
            self.capture.close()

    def parts(self) -> list[PartHealth]:
        """The health of every part this process runs."""
        parts = [] if self.capture is None else [self.capture.health()]
        if self.connectors is not None:
            parts += self.connectors.health()
        return parts

    def health(self) -> tuple[int, dict[str, Any]]:
        """``/healthz``: status and body."""
        return readiness(self.parts())

    def status(self) -> dict[str, Any]:
        """``/status.json``: the sample history, the health and the events per topic."""
        status, health = self.health()
        reading = None if self.capture is None else self.capture.reading(self._clock())
        return {"now": self._clock(), "ready": status == 200, "health": health,
                "topics": {} if reading is None else reading.events_by_topic,
                **self.sampler.history_json()}

    def _take_sample(self) -> Sample:
        now = self._clock()
        lag = {} if self.connectors is None else self.connectors.lag_by_connector()
        if self.capture is None:
            return Sample(now, connector_lag=lag)
        self.capture.refresh()
        reading = self.capture.reading(now)
        return Sample(now, reading.events, reading.lag_bytes, reading.lag_seconds,
                      reading.retained_bytes, lag)

