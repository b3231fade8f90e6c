"""Building sinks from the registry: the factory's contract and clear errors."""

from __future__ import annotations

import logging

import pytest

from cdc.extras import MissingExtraError
from cdc.log.file import FileLog
from connectors.contract import Sink, SinkContext
from connectors.registry import load_sink
from connectors.runtime import ConnectorFailedError, SinkNotRunnableError, build_sink
from connectors.webhook import WebhookSink

from .conftest import SinkBuilders, make_connector, make_runner, run_until

CONTEXT = SinkContext("c1", "app", 0)


def test_a_sink_without_factory_names_its_type(fake_sinks: SinkBuilders) -> None:
    with pytest.raises(SinkNotRunnableError, match="sink type 'unbuilt' cannot run: its "
                                                   "SinkSpec has no factory"):
        build_sink(make_connector(type="unbuilt"), CONTEXT)


def test_a_factory_must_return_a_sink(fake_sinks: SinkBuilders) -> None:
    with pytest.raises(SinkNotRunnableError, match="returned a 'object', which lacks open, "
                                                   "write, flush, close"):
        build_sink(make_connector(type="notasink"), CONTEXT)


def test_the_webhook_factory_builds_a_webhook_sink(fake_sinks: SinkBuilders) -> None:
    connector = make_connector(type="webhook", config={"url": "http://127.0.0.1:9/hook"})
    assert load_sink("webhook").factory is WebhookSink
    assert isinstance(build_sink(connector, CONTEXT), WebhookSink)


def test_a_runner_of_an_unbuilt_sink_fails_clearly(event_log: FileLog,
                                                   fake_sinks: SinkBuilders) -> None:
    runner = make_runner(event_log, make_connector(type="unbuilt"))
    run_until(runner, lambda: False)
    with pytest.raises(ConnectorFailedError, match="connector 'c1' stopped: "
                                                   "SinkNotRunnableError: sink type 'unbuilt'"):
        runner.raise_failure()


def test_a_missing_extra_stops_the_start_before_any_worker_runs(
        event_log: FileLog, fake_sinks: SinkBuilders, caplog: pytest.LogCaptureFixture) -> None:
    built: list[int] = []

    def needs_redis(context: SinkContext) -> Sink:
        built.append(context.worker)
        raise ModuleNotFoundError("No module named 'redis'", name="redis")

    fake_sinks["default"] = needs_redis
    runner = make_runner(event_log, make_connector(workers=3))
    with caplog.at_level(logging.DEBUG, logger="connectors"), \
            pytest.raises(MissingExtraError, match=r"^the fake sink needs the redis extra: "):
        runner.start()
    assert built == [0]  # found once, in the caller's thread
    assert caplog.records == []  # the command's one line is all the user sees
    assert runner.failures == [] and runner.join(5)
