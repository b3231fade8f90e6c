"""Metrics that sinks keep in prometheus_client's default registry, served on /metrics.

A sink (built in or a plugin) may define its own counters at module level, in the
default registry, without a handle on the runtime's registry. ``PluginMetrics`` forwards
the families of that registry whose names start with ``distributary_``, so they appear on
the same endpoint; everything else there (the client's process collectors) is left out.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

PREFIX = "distributary_"


class PluginMetrics(Collector):
    """The ``distributary_*`` families of another registry (the default one)."""

    def __init__(self, source: CollectorRegistry = REGISTRY) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        """Every family of the source registry named ``distributary_*``."""
        return [family for family in self._source.collect()
                if family.name.startswith(PREFIX)]

    def describe(self) -> Iterable[Metric]:
        """Nothing: the families are only known when collected (no duplicate checks)."""
        return []
