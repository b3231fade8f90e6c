"""The whole pipeline seen from the supervisor: its children's endpoints, put together.

Each child serves ``/metrics`` and ``/healthz`` on 127.0.0.1 (a port it picks and
publishes). ``PipelineView`` reads them when asked:

- ``families``: every child's families merged by name (a family several connector
  children serve, such as ``distributary_connector_events_written``, becomes one), plus

      distributary_child_up{child}               1 while the child process runs
      distributary_child_restarts_total{child}   times the child was started again
      distributary_ready                         1 when /healthz answers 200

- ``health``: the parts of every child's ``/healthz``; a child that is down is one part
  named after it (``capture``, ``connector <name>``), not ready, saying when it restarts.
- ``sample``: the status page's readings, from the merged families, and the background
  reconcile's last result (``reconcile``, from its child's ``last_run`` families).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from cdc.observability.health import PartHealth, readiness
from cdc.observability.reconcile_metrics import last_result
from cdc.observability.samples import Sample

from .supervisor import ChildState

P = "distributary_"
_TIMEOUT_S = 2.0


class EndpointReader(Protocol):
    """GETs of a child's endpoint on 127.0.0.1 (``ChildEndpoints``, or a test's fake)."""

    def get(self, port: int, path: str) -> tuple[int, bytes] | None: ...


class ChildEndpoints:
    """GETs of the children's endpoints (with the pipeline's bearer token, if any)."""

    def __init__(self, token: str | None, timeout_s: float = _TIMEOUT_S) -> None:
        self._token = token
        self._timeout_s = timeout_s

    def get(self, port: int, path: str) -> tuple[int, bytes] | None:
        """Status and body; None when the child does not answer."""
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
        if self._token is not None:
            request.add_header("Authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read()
        except (OSError, ValueError):
            return None


def merge_families(texts: Iterable[str]) -> list[Metric]:
    """The families of several exposition texts, one per name, samples concatenated."""
    merged: dict[str, Metric] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            if family.name in merged:
                merged[family.name].samples.extend(family.samples)
            else:
                merged[family.name] = family
    return list(merged.values())


def _down_part(state: ChildState) -> PartHealth:
    why = "not started yet" if state.last_exit is None else state.last_exit.describe()
    when = "" if state.restart_in_s is None else f"; restarting in {state.restart_in_s:.1f}s"
    return PartHealth(state.name, "down", f"the process is down ({why}{when})")


def child_parts(state: ChildState, answer: tuple[int, bytes] | None) -> list[PartHealth]:
    """The parts one child reports on its ``/healthz`` (or why it reports none)."""
    if not state.up:
        return [_down_part(state)]
    if not state.serves_endpoint:
        return [PartHealth(state.name, "running")]
    if answer is None:
        return [PartHealth(state.name, "starting", "the process does not answer yet")]
    try:
        body = json.loads(answer[1])
        states: dict[str, str] = dict(body["parts"])
    except (ValueError, KeyError, TypeError):
        return [PartHealth(state.name, "starting", "the process does not answer yet")]
    problems: dict[str, str] = {}
    for reason in body.get("reasons", []):
        part, _, problem = str(reason).partition(": ")
        problems[part] = problem
    return [PartHealth(name, part_state, problems.get(name)) for name, part_state
            in states.items()]


class PipelineView(Collector):
    """``/metrics``, ``/healthz`` and samples of the pipeline (see the module docstring)."""

    def __init__(self, states: Callable[[], list[ChildState]], endpoints: EndpointReader,
                 connectors: Sequence[str]) -> None:
        self._states = states
        self._endpoints = endpoints
        self._connectors = list(connectors)
        self.reconcile: dict[str, Any] | None = None  # as of the last ``reading``

    def _children_families(self) -> list[Metric]:
        texts = []
        for state in self._states():
            answer = None if state.port is None else self._endpoints.get(state.port, "/metrics")
            if answer is not None and answer[0] == 200:
                texts.append(answer[1].decode("utf-8", "replace"))
        return [family for family in merge_families(texts) if family.name != f"{P}ready"]

    def collect(self) -> Iterable[Metric]:
        """The children's families, then the supervisor's."""
        states = self._states()
        yield from self._children_families()
        up = GaugeMetricFamily(f"{P}child_up", "1 while the child process runs.",
                               labels=["child"])
        restarts = CounterMetricFamily(f"{P}child_restarts",
                                       "Times the child process was started again.",
                                       labels=["child"])
        for state in states:
            up.add_metric([state.name], 1.0 if state.up else 0.0)
            restarts.add_metric([state.name], float(state.restarts))
        yield up
        yield restarts
        status, _ = self.health()
        yield GaugeMetricFamily(f"{P}ready", "1 when /healthz answers 200.",
                                value=1.0 if status == 200 else 0.0)

    def describe(self) -> Iterable[Metric]:
        """Nothing: the families are only known when collected."""
        return []

    def parts(self) -> list[PartHealth]:
        """Every part of every child."""
        parts: list[PartHealth] = []
        for state in self._states():
            answer = None if state.port is None else self._endpoints.get(state.port, "/healthz")
            parts += child_parts(state, answer)
        return parts

    def health(self) -> tuple[int, dict[str, Any]]:
        """``/healthz``: status and body."""
        return readiness(self.parts())

    def reading(self, now: float) -> tuple[Sample, dict[str, int]]:
        """A status-page sample and the events per topic, from the children's metrics."""
        values: dict[str, float] = {}
        topics: dict[str, int] = {}
        lag = dict.fromkeys(self._connectors, 0)
        capture = False
        families = self._children_families()
        self.reconcile = last_result(sample for family in families
                                     for sample in family.samples)
        for family in families:
            capture = capture or family.name == f"{P}capture_events"
            for sample in family.samples:
                if sample.name == f"{P}capture_events_total":
                    topic = sample.labels.get("topic", "")
                    topics[topic] = topics.get(topic, 0) + int(sample.value)
                elif sample.name == f"{P}connector_lag":
                    name = sample.labels.get("connector", "")
                    lag[name] = lag.get(name, 0) + int(sample.value)
                else:
                    values[sample.name] = sample.value

        def whole(name: str) -> int | None:
            value = values.get(f"{P}{name}")
            return None if value is None else int(value)

        lag_seconds = values.get(f"{P}capture_lag_seconds")
        return Sample(now, sum(topics.values()) if capture else None, whole("capture_lag_bytes"),
                      lag_seconds, whole("slot_retained_wal_bytes"), lag), topics
