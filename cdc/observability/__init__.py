"""Observability of a running pipeline: ``/metrics``, ``/healthz`` and a status page.

``start_observability`` builds and starts an ``ObservabilityServer`` from the
``metrics:`` section (nothing when it is absent). Modules: ``probes`` (what the capture
and the connectors report), ``wal`` (server WAL position, slot retained WAL),
``exposition`` (Prometheus series), ``health`` (/healthz), ``samples`` + ``sampler``
(the status page's history), ``endpoint`` (HTTP), ``server`` (all of it together).
"""

from .launch import start_observability
from .probes import CaptureProbe, ConnectorsProbe
from .server import ObservabilityServer

__all__ = ["CaptureProbe", "ConnectorsProbe", "ObservabilityServer", "start_observability"]
