from __future__ import annotations

from dataclasses import dataclass, field

from cdc.capture.runner import CaptureStats
from cdc.observability.connector_metrics import RuntimeMetrics
from cdc.observability.probes import (
    PG_EPOCH_UNIX_S,
    CaptureProbe,
    ConnectorsProbe,
    lag_bytes,
    lag_seconds,
)


def test_lag_bytes_is_server_position_minus_flushed() -> None:
    assert lag_bytes(5_000, 4_000, None) == 1_000
    assert lag_bytes(5_000, 0, 4_500) == 500  # before the capture acked: the slot's position
    assert lag_bytes(5_000, 4_800, 4_500) == 200
    assert lag_bytes(5_000, 6_000, None) == 0  # an older server reading: never negative
    assert lag_bytes(None, 4_000, 4_000) is None
    assert lag_bytes(5_000, 0, None) is None


def test_lag_seconds_counts_from_the_last_commit_while_behind() -> None:
    stats = CaptureStats(acked_lsn=100, server_lsn=100, received_lsn=500,
                         commit_ts_us=10_000_000)
    now = PG_EPOCH_UNIX_S + 12.5
    assert lag_seconds(stats, now) == 2.5


def test_lag_seconds_is_zero_once_everything_received_is_acknowledged() -> None:
    stats = CaptureStats(acked_lsn=600, server_lsn=600, received_lsn=500, commit_ts_us=1)
    assert lag_seconds(stats, PG_EPOCH_UNIX_S + 1e6) == 0.0


def test_lag_seconds_is_unknown_before_the_first_commit() -> None:
    assert lag_seconds(CaptureStats(received_lsn=10), PG_EPOCH_UNIX_S) is None


def test_capture_probe_reads_stats_and_health() -> None:
    stats = CaptureStats(acked_lsn=10)
    stats.events_by_topic.update(["a", "a", "b"])
    alive = [True]
    probe = CaptureProbe(stats, None, lambda: alive[0])
    reading = probe.reading(0.0)
    assert reading.events == 3 and reading.events_by_topic == {"a": 2, "b": 1}
    assert reading.lag_bytes is None and reading.retained_bytes is None
    assert probe.health().state == "starting" and not probe.health().ready
    stats.streaming = True
    assert probe.health().ready
    alive[0] = False
    assert probe.health().state == "stopped"


def test_capture_probe_names_why_the_capture_is_reconnecting() -> None:
    stats = CaptureStats()
    probe = CaptureProbe(stats, None, lambda: True)
    stats.last_failure = 'FATAL:  password authentication failed for user "cdc"'
    health = probe.health()
    assert health.state == "reconnecting" and not health.ready
    assert health.problem == ('not streaming: retrying after FATAL:  password '
                              'authentication failed for user "cdc"')
    stats.streaming = True
    assert probe.health().ready


def test_capture_probe_names_why_appends_to_the_log_wait() -> None:
    stats = CaptureStats(streaming=True)
    probe = CaptureProbe(stats, None, lambda: True)
    assert probe.health().ready
    stats.log_problem = lambda: "Kafka: SASL authentication error: Authentication failed"
    health = probe.health()
    assert (health.state, health.problem) == (
        "waiting for the log",
        "appending to the log, retrying: Kafka: SASL authentication error: Authentication "
        "failed")


@dataclass
class FakeRunner:
    group: str
    stopping: bool = False
    failures: list[BaseException] = field(default_factory=list)
    problem: str | None = None


def test_connectors_probe_health_follows_the_runners() -> None:
    probe = ConnectorsProbe(RuntimeMetrics(), ["cache", "search"])
    assert [p.state for p in probe.health()] == ["starting", "starting"]
    cache, search = FakeRunner("cache"), FakeRunner("search")
    probe.attach([cache, search])
    assert all(part.ready for part in probe.health())
    search.failures.append(RuntimeError("password=hunter2"))
    cache.stopping = True
    parts = {p.name: p for p in probe.health()}
    assert parts["connector search"].state == "failed"
    assert "hunter2" not in str(parts["connector search"])
    assert parts["connector cache"].state == "stopping"


def test_a_connector_retrying_its_sink_says_why() -> None:
    probe = ConnectorsProbe(RuntimeMetrics(), ["search"])
    search = FakeRunner("search", problem="retrying write: SinkUnavailableError: HTTP 401")
    probe.attach([search])
    part = probe.health()[0]
    assert (part.state, part.problem) == ("retrying",
                                          "retrying write: SinkUnavailableError: HTTP 401")
    from prometheus_client import CollectorRegistry, generate_latest

    from cdc.observability.exposition import StatusCollector

    registry = CollectorRegistry()
    registry.register(StatusCollector(None, None, probe, probe.health))
    text = generate_latest(registry).decode()
    assert 'distributary_connector_running{connector="search"} 1.0' in text, \
        "retrying its sink, the connector still runs"
    assert "distributary_ready 0.0" in text
    search.problem = None
    assert probe.health()[0].ready


def test_connectors_probe_sums_lag_over_partitions() -> None:
    metrics = RuntimeMetrics()
    probe = ConnectorsProbe(metrics, ["cache", "idle"])
    metrics.for_connector("cache").set_lag("t", 0, 5)
    metrics.for_connector("cache").set_lag("t", 1, 7)
    assert probe.lag_by_connector() == {"cache": 12, "idle": 0}


def test_a_standby_is_ready_and_its_takeovers_are_exposed() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from cdc.observability.exposition import StatusCollector

    stats = CaptureStats(standby=True)
    probe = CaptureProbe(stats, None, lambda: True)
    assert probe.health().state == "standby" and probe.health().ready
    stats.standby, stats.streaming = False, True
    stats.takeover_seconds += [1.2, 7.5]
    registry = CollectorRegistry()
    registry.register(StatusCollector(probe, "s", None, lambda: [probe.health()]))
    text = generate_latest(registry).decode()
    assert "distributary_capture_active 1.0" in text
    assert "distributary_capture_takeovers_total 2.0" in text
    assert 'distributary_capture_takeover_seconds_bucket{le="2.0"} 1.0' in text
    assert 'distributary_capture_takeover_seconds_bucket{le="10.0"} 2.0' in text
    assert "distributary_capture_takeover_seconds_sum 8.7" in text
