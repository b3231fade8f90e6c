"""Starting the endpoint from a pipeline's config, the way the commands do it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry

from cdc.capture.runner import CaptureStats
from cdc.config import ConnectorConfig, PipelineConfig

from .connector_metrics import RuntimeMetrics
from .probes import CaptureProbe, ConnectorsProbe
from .server import ObservabilityServer
from .wal import ServerWal


def start_observability(config: PipelineConfig, metrics: RuntimeMetrics | None = None, *,
                        capture: CaptureStats | None = None,
                        capture_alive: Callable[[], bool] = lambda: True,
                        connectors: Sequence[ConnectorConfig] = ()
                        ) -> ObservabilityServer | None:
    """Serve the endpoint of ``config.metrics`` (None when the section is absent).

    ``capture``: the running capture's stats; ``connectors``: those this process runs
    (attach their runners with ``server.connectors.attach``). Raises ``ConfigError``
    naming ``metrics.port`` when the address cannot be bound.
    """
    if config.metrics is None:
        return None
    registry = metrics.registry if metrics is not None else CollectorRegistry()
    capture_probe = None
    if capture is not None:
        wal = ServerWal(config.source.conninfo(), config.source.slot)
        capture_probe = CaptureProbe(capture, wal, capture_alive)
    connectors_probe = None
    if connectors:
        connectors_probe = ConnectorsProbe(metrics or RuntimeMetrics(registry),
                                           [connector.name for connector in connectors])
    server = ObservabilityServer(config.metrics, registry, capture=capture_probe,
                                 slot=config.source.slot, connectors=connectors_probe)
    server.start()
    return server
