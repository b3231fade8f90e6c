"""``ObservabilityServer``: the endpoint of ``cdc run`` / ``capture`` / ``connect``.

It puts together the probes (capture, connectors), the sampler feeding the status page,
the Prometheus registry shared with the connector runtime, and the HTTP endpoint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry

from cdc.config.models import MetricsConfig
from cdc.errors import ConfigError, ConfigProblem

from .auth import BearerToken
from .endpoint import HttpEndpoint, Routes
from .exposition import StatusCollector
from .health import PartHealth, readiness
from .plugin_metrics import PluginMetrics
from .probes import CaptureProbe, ConnectorsProbe
from .sampler import Sampler
from .samples import Sample, SampleHistory

log = logging.getLogger(__name__)


class ObservabilityServer:
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
        token = None if config.token is None else config.token.get_secret_value()
        history = SampleHistory(config.sample_interval.total_seconds())
        self._sampler = Sampler(history, self._take_sample)
        routes = Routes(registry, BearerToken(token), self.health, self.status)
        self._endpoint = listen(config, routes)
        self.announce = True  # False in a child of ``cdc run``: its supervisor announces

    @property
    def address(self) -> tuple[str, int]:
        """The bound host and port."""
        return self._endpoint.address

    def start(self) -> None:
        """Start sampling and serving."""
        self._sampler.start()
        self._endpoint.start()
        if self.announce:
            announce(self.address)

    def stop(self) -> None:
        """Stop serving and sampling; close the probe's connection."""
        self._endpoint.stop()
        self._sampler.stop()
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
                **self._sampler.history_json()}

    def _take_sample(self) -> Sample:
        now = self._clock()
        lag = {} if self.connectors is None else self.connectors.lag_by_connector()
        if self.capture is None:
            return Sample(now, connector_lag=lag)
        self.capture.refresh()
        reading = self.capture.reading(now)
        return Sample(now, reading.events, reading.lag_bytes, reading.lag_seconds,
                      reading.retained_bytes, lag)


def listen(config: MetricsConfig, routes: Routes) -> HttpEndpoint:
    """An endpoint bound to ``config.host:config.port`` (not serving yet); ``ConfigError``
    naming ``metrics.port`` when the address cannot be bound."""
    try:
        return HttpEndpoint(config.host, config.port, routes)
    except OSError as exc:
        raise ConfigError([ConfigProblem(
            "metrics.port", f"cannot listen on {config.host}:{config.port}: "
            f"{exc.strerror or exc}; choose another metrics.host/metrics.port")]) from None


def announce(address: tuple[str, int]) -> None:
    """Log where the endpoint listens (one line, with ``host`` and ``port`` as fields)."""
    host, port = address
    shown = f"[{host}]" if ":" in host else host
    log.info("observability endpoint on http://%s:%d/ (/metrics, /healthz, status page)",
             shown, port, extra={"host": host, "port": port})
