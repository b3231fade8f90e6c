"""The supervisor's endpoint: ``/metrics``, ``/healthz``, ``/status.json`` and the status
page of the whole pipeline, on ``metrics.host:metrics.port``, from ``PipelineView``."""

from __future__ import annotations

import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry

from cdc.config.models import MetricsConfig
from cdc.observability.health import READY
from cdc.observability.samples import Sample
from cdc.observability.serving import SampledEndpoint, status_url

from .view import PipelineView

log = logging.getLogger(__name__)


class PipelineEndpoint(SampledEndpoint):
    """Serves the pipeline's endpoint; ``start`` then ``stop``."""

    def __init__(self, config: MetricsConfig, view: PipelineView) -> None:
        self._view = view
        self._topics: dict[str, int] = {}
        self._said_ready = False
        registry = CollectorRegistry()
        registry.register(view)
        super().__init__(config, registry, view.health, self.status, self._take_sample)

    def status(self) -> dict[str, Any]:
        """``/status.json``: the sample history, the health, the events per topic and the
        background reconcile's last result (``null`` without one)."""
        status, health = self._view.health()
        return {"now": time.time(), "ready": status == 200, "health": health,
                "topics": dict(self._topics), "reconcile": self._view.reconcile,
                **self.sampler.history_json()}

    def _take_sample(self) -> Sample:
        sample, topics = self._view.reading(time.time())
        if topics:
            self._topics = topics
        if not self._said_ready and self._view.health()[0] == READY:
            self._said_ready = True  # once: the first time every part is ready
            log.info("pipeline ready: status page %s", status_url(self.address))
        return sample
