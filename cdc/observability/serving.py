"""``SampledEndpoint``: an HTTP endpoint with the sampler behind its status page.

The endpoint of a ``cdc capture`` / ``connect`` process (``server``) and that of a
``cdc run`` supervisor (``cdc.supervisor.endpoint``) differ in what they measure; both
bind ``metrics.host:metrics.port``, sample every ``metrics.sample_interval`` and serve
``/metrics``, ``/healthz``, ``/status.json`` and ``/`` through ``Routes``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from cdc.config.models import MetricsConfig
from cdc.errors import ConfigError, ConfigProblem

from .auth import BearerToken
from .endpoint import HttpEndpoint, Routes
from .sampler import Sampler
from .samples import Sample, SampleHistory

log = logging.getLogger(__name__)


class SampledEndpoint:
    """``/metrics`` from ``registry``, ``/healthz`` from ``health``, ``/status.json`` from
    ``status`` (which may use ``sampler``), a sample from ``take_sample`` each interval."""

    def __init__(self, config: MetricsConfig, registry: CollectorRegistry,
                 health: Callable[[], tuple[int, dict[str, Any]]],
                 status: Callable[[], dict[str, Any]],
                 take_sample: Callable[[], Sample]) -> None:
        token = None if config.token is None else config.token.get_secret_value()
        self.sampler = Sampler(SampleHistory(config.sample_interval.total_seconds()),
                               take_sample)
        self._endpoint = listen(config, Routes(registry, BearerToken(token), health, status))
        self.announce = True  # False in a child of ``cdc run``: its supervisor announces

    @property
    def address(self) -> tuple[str, int]:
        """The bound host and port."""
        return self._endpoint.address

    def start(self) -> None:
        """Start sampling and serving."""
        self.sampler.start()
        self._endpoint.start()
        if self.announce:
            announce(self.address)

    def stop(self) -> None:
        """Stop serving and sampling."""
        self._endpoint.stop()
        self.sampler.stop()


def listen(config: MetricsConfig, routes: Routes) -> HttpEndpoint:
    """An endpoint bound to ``config.host:config.port`` (not serving yet); ``ConfigError``
    naming ``metrics.port`` when the address cannot be bound."""
    try:
        return HttpEndpoint(config.host, config.port, routes)
    except OSError as exc:
        raise ConfigError([ConfigProblem(
            "metrics.port", f"cannot listen on {config.host}:{config.port}: "
            f"{exc.strerror or exc}; choose another metrics.host/metrics.port")]) from None


def status_url(address: tuple[str, int]) -> str:
    """The status page's URL at ``address`` (an IPv6 host in brackets)."""
    host, port = address
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


def announce(address: tuple[str, int]) -> None:
    """Log where the endpoint listens (one line, with ``host`` and ``port`` as fields)."""
    host, port = address
    log.info("observability endpoint on %s (/metrics, /healthz, status page)",
             status_url(address), extra={"host": host, "port": port})
