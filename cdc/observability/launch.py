"""Starting the endpoint from a pipeline's config, the way the commands do it.

A child of ``cdc run`` finds ``DISTRIBUTARY_CHILD_ENDPOINT_FILE`` in its environment: it
then listens on 127.0.0.1 on a port the kernel picks (``metrics.port`` belongs to the
supervisor), writes that port to the file, and leaves announcing to the supervisor,
which serves the whole pipeline's endpoint from its children's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry

from cdc.capture.runner import CaptureStats
from cdc.config import ConnectorConfig, PipelineConfig

from .connector_metrics import RuntimeMetrics
from .probes import CaptureProbe, ConnectorsProbe
from .server import ObservabilityServer
from .wal import ServerWal

CHILD_ENDPOINT_ENV = "DISTRIBUTARY_CHILD_ENDPOINT_FILE"


def start_observability(config: PipelineConfig, metrics: RuntimeMetrics | None = None, *,
                        capture: CaptureStats | None = None,
                        capture_alive: Callable[[], bool] = lambda: True,
                        connectors: Sequence[ConnectorConfig] = (),
                        registry: CollectorRegistry | None = None
                        ) -> ObservabilityServer | None:
    """Serve the endpoint of ``config.metrics`` (None when the section is absent).

    ``capture``: the running capture's stats; ``connectors``: those this process runs
    (attach their runners with ``server.connectors.attach``). Raises ``ConfigError``
    naming ``metrics.port`` when the address cannot be bound. ``registry``: the families
    to serve when there is no ``metrics`` (``cdc reconcile --continuous``'s).
    """
    if config.metrics is None:
        return None
    if metrics is not None:
        registry = metrics.registry
    elif registry is None:
        registry = CollectorRegistry()
    capture_probe = None
    if capture is not None:
        wal = ServerWal(config.source.conninfo(), config.source.slot)
        capture_probe = CaptureProbe(capture, wal, capture_alive)
    connectors_probe = None
    if connectors:
        connectors_probe = ConnectorsProbe(metrics or RuntimeMetrics(registry),
                                           [connector.name for connector in connectors])
    child_file = os.environ.get(CHILD_ENDPOINT_ENV)
    metrics_config = config.metrics
    if child_file:  # no validation: port 0 lets the kernel pick
        metrics_config = metrics_config.model_copy(update={"host": "127.0.0.1", "port": 0})
    server = ObservabilityServer(metrics_config, registry, capture=capture_probe,
                                 slot=config.source.slot, connectors=connectors_probe)
    server.announce = not child_file
    server.start()
    if child_file:
        write_port(Path(child_file), server.address[1])
    return server


def write_port(path: Path, port: int) -> None:
    """Publish ``port`` in ``path`` at once (a reader sees no file or the whole port)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(f"{port}\n")
    os.replace(partial, path)
