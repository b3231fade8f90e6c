"""What ``/metrics`` of a running ``cdc run`` shows while a connector's sink is down."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from ..observability.pipeline_process import Pipeline


def samples(pipeline: Pipeline, name: str, **labels: str) -> list[float]:
    """The values of every series ``name`` whose labels include ``labels``."""
    status, text = pipeline.get("/metrics")
    assert status == 200, text
    return [sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name
            and all(sample.labels.get(key) == value for key, value in labels.items())]


def sample_sum(pipeline: Pipeline, name: str, **labels: str) -> float:
    """The sum of ``samples`` (0 when there is none)."""
    return sum(samples(pipeline, name, **labels))


@dataclass
class OutageWatch:
    """Counters of the capture and of one connector before and after an outage, and the
    connector's largest lag (over its topic's partitions) seen during it."""

    pipeline: Pipeline
    connector: str
    topic: str
    before: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)
    max_lag: float = 0.0
    seconds: float = 0.0

    def __post_init__(self) -> None:
        self.before = self._counters()

    def _counters(self) -> dict[str, float]:
        pipeline, connector = self.pipeline, self.connector
        return {
            "logged": sample_sum(pipeline, "distributary_capture_events_total",
                                 topic=self.topic),
            "acknowledged": sample_sum(pipeline, "distributary_capture_acknowledged_lsn"),
            "retries": sample_sum(pipeline, "distributary_connector_retries_total",
                                  connector=connector),
            "dead_letters": sample_sum(pipeline, "distributary_connector_dead_letters_total",
                                       connector=connector),
        }

    def lag(self) -> float:
        """The connector's lag on the topic, summed over partitions."""
        return sample_sum(self.pipeline, "distributary_connector_lag",
                          connector=self.connector, topic=self.topic)

    def during(self, seconds: float) -> None:
        """Watch for ``seconds``: the process and the connector must stay up."""
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            assert self.pipeline.process.poll() is None, "cdc run exited during the outage"
            assert sample_sum(self.pipeline, "distributary_connector_running",
                              connector=self.connector) == 1, "the connector stopped"
            self.max_lag = max(self.max_lag, self.lag())
            time.sleep(1.0)
        self.seconds = time.monotonic() - started
        self.after = self._counters()

    def check(self, *, min_lag: float, max_retries_per_s: float) -> None:
        """The capture went on, the connector retried with backoff, the lag grew."""
        grew = {name: self.after[name] - self.before[name] for name in self.before}
        assert grew["logged"] > min_lag, f"the log grew during the outage: {grew}"
        assert grew["acknowledged"] > 0, "the capture kept acknowledging"
        assert 0 < grew["retries"] <= max_retries_per_s * self.seconds, (
            f"retries with backoff during {self.seconds:.0f} s: {grew['retries']:.0f}")
        assert grew["dead_letters"] == 0, "nothing is dead-lettered during an outage"
        assert self.max_lag >= min_lag, f"the lag on /metrics grew: {self.max_lag}"
