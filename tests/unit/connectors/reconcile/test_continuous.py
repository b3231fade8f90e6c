"""The background reconcile's pure parts: the ``reconcile:`` section, one run counted into
the metrics, the schedule, the child ``cdc run`` starts, and the last result on the
status page (read back from the merged metrics, as the supervisor does)."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from cdc.config import parse_config
from cdc.errors import ConfigError
from cdc.extras import MissingExtraError
from cdc.observability.reconcile_metrics import ReconcileMetrics, last_result
from cdc.supervisor import ChildState, PipelineView, child_specs
from cdc.supervisor.view import merge_families
from connectors.reconcile.catchup import CatchUpTimeoutError
from connectors.reconcile.check import Summary
from connectors.reconcile.continuous import run_every, run_once, watch

BASE = """
source:
  dsn: postgresql://app@127.0.0.1:5432/app
  slot: app
  publication: app
log:
  backend: file
  path: /tmp/log
connectors:
  - name: search
    type: opensearch
    topics: [app.public.orders]
    config:
      hosts: [http://127.0.0.1:9200]
"""


def found(missing: int = 0, extra: int = 0, different: int = 0) -> Summary:
    return Summary(2, 500, Counter(missing=missing, extra=extra, different=different))


def sample_values(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    values = {}
    for family in merge_families([generate_latest(registry).decode()]):
        for sample in family.samples:
            values[sample.name, ",".join(sample.labels.values())] = sample.value
    return values


def test_the_section_has_defaults_and_is_checked() -> None:
    config = parse_config(BASE + "reconcile: {interval: 90s, tables: [public.orders]}\n")
    assert config.reconcile is not None
    assert config.reconcile.interval == timedelta(seconds=90)
    assert (config.reconcile.rate, config.reconcile.connectors) == (1000.0, ())
    assert parse_config(BASE).reconcile is None
    for section, problem in [
            ("{connectors: [search, cache]}",
             "reconcile.connectors[1]: no connector named 'cache'; configured: search"),
            ("{rate: 0}", "reconcile.rate:"),
            ("{interval: soon}", "reconcile.interval:"),
            ("{tables: [orders]}", "reconcile.tables[0]:"),
            ("{repair: true}", "reconcile.repair: unknown key")]:
        with pytest.raises(ConfigError) as raised:
            parse_config(BASE + f"reconcile: {section}\n")
        assert problem in str(raised.value), (section, str(raised.value))


def test_a_run_is_logged_and_counted() -> None:
    metrics = ReconcileMetrics(CollectorRegistry())
    assert run_once(lambda: found(missing=1, different=2), metrics, lambda: 1000.0) is not None
    run_once(lambda: found(), metrics, lambda: 2000.0)
    values = sample_values(metrics.registry)
    assert values["distributary_reconcile_rows_checked_total", ""] == 1000
    assert values["distributary_reconcile_differences_total", "missing"] == 1
    assert values["distributary_reconcile_differences_total", "different"] == 2
    assert values["distributary_reconcile_differences_total", "extra"] == 0
    assert values["distributary_reconcile_runs_total", "clean"] == 1
    assert values["distributary_reconcile_runs_total", "different"] == 1
    assert values["distributary_reconcile_last_run_differences", "missing"] == 0
    assert values["distributary_reconcile_last_run_timestamp_seconds", ""] == 2000


def test_a_run_that_cannot_finish_is_counted_and_the_next_one_comes() -> None:
    metrics = ReconcileMetrics(CollectorRegistry())

    def stuck() -> Summary:
        raise CatchUpTimeoutError("connector 'search' has not consumed … in time")

    assert run_once(stuck, metrics, lambda: 5.0) is None
    values = sample_values(metrics.registry)
    assert values["distributary_reconcile_runs_total", "unfinished"] == 1
    assert values["distributary_reconcile_last_run_finished", ""] == 0

    def no_client() -> Summary:
        raise MissingExtraError("cdc reconcile", "redis")

    with pytest.raises(MissingExtraError):  # an installation problem: the process stops
        run_once(no_client, metrics)


class FakeTime:
    """A monotonic clock that moves only when the loop waits or a run takes time."""

    def __init__(self, runs_before_stop: int, run_takes_s: float) -> None:
        self.now = 0.0
        self.waits: list[float] = []
        self.starts: list[float] = []
        self._left = runs_before_stop
        self._run_takes_s = run_takes_s

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(timeout)
        self.now += timeout
        return self._left == 0

    def check(self) -> Summary:
        self.starts.append(self.now)
        self.now += self._run_takes_s
        self._left -= 1
        return found()


@pytest.mark.parametrize(("takes", "starts"), [(10.0, [60.0, 120.0, 180.0]),
                                               (90.0, [60.0, 150.0, 240.0])])
def test_runs_start_an_interval_apart_or_at_once_after_a_long_one(
        takes: float, starts: list[float]) -> None:
    fake = FakeTime(runs_before_stop=3, run_takes_s=takes)
    stop = threading.Event()
    stop.wait = fake.wait  # type: ignore[method-assign]
    run_every(fake.check, 60.0, stop, ReconcileMetrics(CollectorRegistry()),
              monotonic=lambda: fake.now)
    assert fake.starts == starts
    assert fake.waits[0] == 60.0


def test_watch_returns_on_stop_and_reraises_a_failure() -> None:
    stop, release = threading.Event(), threading.Event()
    stop.set()

    def blocked() -> None:
        release.wait()

    watch(blocked, stop)  # a run in progress is abandoned
    release.set()

    def broken() -> None:
        raise MissingExtraError("cdc reconcile", "opensearch")

    with pytest.raises(MissingExtraError):
        watch(broken, threading.Event())


def test_cdc_run_starts_the_reconcile_child_only_for_a_section() -> None:
    path = Path("/etc/pipeline.yaml")
    specs = child_specs(path, ["search"], recreate_lost_slot=False, reconcile=True)
    assert [spec.name for spec in specs] == ["capture", "connector search", "reconcile"]
    assert specs[-1].args == ("reconcile", "-c", str(path), "--continuous")
    plain = child_specs(path, ["search"], recreate_lost_slot=False)
    assert [spec.name for spec in plain] == ["capture", "connector search"]


class Endpoints:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def get(self, port: int, path: str) -> tuple[int, bytes] | None:
        return (200, generate_latest(self.registry)) if path == "/metrics" else None


def test_the_status_page_shows_the_last_summary_line_and_its_time() -> None:
    metrics = ReconcileMetrics(CollectorRegistry())
    view = PipelineView(lambda: [ChildState("reconcile", True, 0, 1003)],
                        Endpoints(metrics.registry), [])
    view.reading(1.0)
    assert view.reconcile is None  # no run yet
    metrics.finished(1700000000.0, 1, 2000, Counter(missing=1, extra=3))
    view.reading(2.0)
    assert view.reconcile == {
        "at": 1700000000.0, "finished": True,
        "summary": "reconcile: tables=1 rows=2000 missing=1 extra=3 different=0"}
    metrics.unfinished(1700000600.0)
    view.reading(3.0)
    assert view.reconcile == {"at": 1700000600.0, "finished": False, "summary": None}
    assert last_result([]) is None


def test_cdc_run_starts_the_columnar_child_only_when_asked() -> None:
    path = Path("/etc/pipeline.yaml")
    specs = child_specs(path, [], recreate_lost_slot=False, columnar_every=60.0)
    assert [spec.name for spec in specs] == ["capture", "columnar"]
    assert specs[-1].args == ("log", "columnar", "-c", str(path), "--every", "60")
    assert not specs[-1].serves_endpoint and specs[0].serves_endpoint
    assert "columnar" not in [s.name for s in child_specs(path, [], recreate_lost_slot=False)]


def test_cdc_run_starts_the_lakehouse_child_only_when_asked() -> None:
    path = Path("/etc/pipeline.yaml")
    specs = child_specs(path, ["search"], recreate_lost_slot=False, lakehouse_every=300.0)
    assert [spec.name for spec in specs] == ["capture", "connector search", "lakehouse"]
    assert specs[-1].args == ("replay", "materialize", "-c", str(path), "--format", "delta",
                              "--every", "300", "--master", "local[1]", "--no-progress")
    assert not specs[-1].serves_endpoint
    on_a_cluster = child_specs(path, [], recreate_lost_slot=False, lakehouse_every=1.5,
                               lakehouse_master="spark://127.0.0.1:7077")
    assert on_a_cluster[-1].args[-4:] == ("1.5", "--master", "spark://127.0.0.1:7077",
                                          "--no-progress")
    assert "lakehouse" not in [s.name for s in child_specs(path, [], recreate_lost_slot=False)]
