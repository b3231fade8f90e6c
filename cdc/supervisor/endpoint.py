"""The supervisor's endpoint: ``/metrics``, ``/healthz``, ``/status.json`` and the status
page of the whole pipeline, on ``metrics.host:metrics.port``, from ``PipelineView``."""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry

from cdc.config.models import MetricsConfig
from cdc.observability.auth import BearerToken
from cdc.observability.endpoint import Routes
from cdc.observability.sampler import Sampler
from cdc.observability.samples import Sample, SampleHistory
from cdc.observability.server import announce, listen

from .view import PipelineView


class PipelineEndpoint:
    """Serves the pipeline's endpoint; ``start`` then ``stop``."""

    def __init__(self, config: MetricsConfig, view: PipelineView) -> None:
        self._view = view
        self._topics: dict[str, int] = {}
        registry = CollectorRegistry()
        registry.register(view)
        token = None if config.token is None else config.token.get_secret_value()
        self._sampler = Sampler(SampleHistory(config.sample_interval.total_seconds()),
                                self._take_sample)
        routes = Routes(registry, BearerToken(token), view.health, self.status)
        self._endpoint = listen(config, routes)

    @property
    def address(self) -> tuple[str, int]:
        return self._endpoint.address

    def start(self) -> None:
        """Start sampling and serving."""
        self._sampler.start()
        self._endpoint.start()
        announce(self.address)

    def stop(self) -> None:
        """Stop serving and sampling."""
        self._endpoint.stop()
        self._sampler.stop()

    def status(self) -> dict[str, Any]:
        """``/status.json``: the sample history, the health, the events per topic and the
        background reconcile's last result (``null`` without one)."""
        status, health = self._view.health()
        return {"now": time.time(), "ready": status == 200, "health": health,
                "topics": dict(self._topics), "reconcile": self._view.reconcile,
                **self._sampler.history_json()}

    def _take_sample(self) -> Sample:
        sample, topics = self._view.reading(time.time())
        if topics:
            self._topics = topics
        return sample
