"""Helpers for the connector tests: a file log in a tmp dir, the ``fake`` sink type,
connectors, and running a runner until a condition holds."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.config import ConnectorConfig
from cdc.log import Position, Record
from cdc.log.file import FileLog, FileLogSettings
from cdc.plugins import index as registry
from connectors.contract import Sink, SinkContext
from connectors.runtime import ConnectorRunner, RunnerOptions, RuntimeMetrics

from . import fakes

TOPIC = "app.public.orders"
PREFIX = "app"
GROUP = "c1"

SinkBuilders = dict[str, Callable[[SinkContext], Sink]]


@pytest.fixture
def fake_sinks(monkeypatch: pytest.MonkeyPatch) -> Iterator[SinkBuilders]:
    """Register the ``fake``, ``unbuilt`` and ``notasink`` sinks beside the built-in ones."""
    points = [EntryPoint(name, value, registry.ENTRY_POINT_GROUP) for name, value in {
        "fake": "tests.unit.connectors.fakes:SPEC",
        "unbuilt": "tests.unit.connectors.fakes:UNBUILT",
        "notasink": "tests.unit.connectors.fakes:NOT_A_SINK",
        "webhook": "connectors.webhook:SPEC"}.items()]
    monkeypatch.setattr(registry, "entry_points", lambda group: points)
    yield fakes.SINKS
    fakes.SINKS.clear()


@pytest.fixture
def event_log(tmp_path: Path) -> Iterator[FileLog]:
    log = FileLog(tmp_path / "log", FileLogSettings(default_partitions=1, fsync=False))
    yield log
    log.close()


def event_record(key: int, lsn: int, seq: int = 0, topic: str = TOPIC,
                 **after: Any) -> Record:
    """An update event of row ``key`` committed at ``lsn``."""
    value = orjson.dumps({"op": "u", "key": {"id": key}, "before": None,
                          "after": {"id": key, **after}, "unchanged": []})
    return Record(topic, orjson.dumps({"id": key}), value, Position(lsn, seq))


def append_events(log: FileLog, keys: list[int], first_lsn: int = 100) -> None:
    """One event per key, positions increasing in list order."""
    log.producer().append([event_record(key, first_lsn + i) for i, key in enumerate(keys)])


def make_connector(script: str = "default", **fields: Any) -> ConnectorConfig:
    """A ``fake`` connector named ``c1`` on TOPIC (``fields`` override)."""
    raw: dict[str, Any] = {"name": GROUP, "type": "fake", "topics": [TOPIC],
                           "batch_size": 100, "batch_timeout": "50ms",
                           "config": {"script": script}}
    raw.update(fields)
    return ConnectorConfig.model_validate(raw)


def make_runner(log: FileLog, connector: ConnectorConfig,
                metrics: RuntimeMetrics | None = None, **options: Any) -> ConnectorRunner:
    return ConnectorRunner(connector, log, topic_prefix=PREFIX, metrics=metrics,
                           options=RunnerOptions(**options))


def run_until(runner: ConnectorRunner, done: Callable[[], bool], timeout: float = 10) -> None:
    """Start ``runner``, wait for ``done()`` (or a failure), then stop and drain it."""
    runner.start()
    deadline = time.monotonic() + timeout
    try:
        while not done() and not runner.failures:
            assert time.monotonic() < deadline, "timed out waiting for the runner"
            time.sleep(0.02)
    finally:
        runner.stop()
        assert runner.join(10), "the runner did not drain"


def committed(log: FileLog, group: str = GROUP) -> dict[tuple[str, int], int | None]:
    return {(lag.topic, lag.partition): lag.committed for lag in log.admin().group_lag(group)}


def read_topic(log: FileLog, topic: str) -> list[dict[str, Any]]:
    """Every value of ``topic`` (all partitions), decoded."""
    consumer = log.consumer(f"reader-{time.monotonic_ns()}", topics=[topic])
    try:
        values: list[dict[str, Any]] = []
        while batch := consumer.poll(1000, timeout=0.3):
            values += [orjson.loads(m.value) for m in batch]
        return values
    finally:
        consumer.close()


def sample(metrics: RuntimeMetrics, name: str, **labels: str) -> float | None:
    """The value of ``distributary_connector_<name>`` for connector ``c1``."""
    return metrics.registry.get_sample_value(f"distributary_connector_{name}",
                                             {"connector": GROUP, **labels})
