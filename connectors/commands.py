"""``cdc connect -c FILE [--connector NAME]``: run connectors until SIGTERM or Ctrl-C."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from cdc.config import ConnectorConfig, PipelineConfig
from cdc.config.commands import ConfigErrorExit, config_option, load_config_or_exit
from cdc.errors import DistributaryError, config_error_in
from cdc.extras import MissingExtraError
from cdc.log import Log
from cdc.log.target import open_log_or_exit
from cdc.logsetup import configure_logging

from .runtime import ConnectorFailedError, ConnectorRunner, RuntimeMetrics

log = logging.getLogger(__name__)


def select_connectors(config: PipelineConfig, names: Sequence[str]) -> list[ConnectorConfig]:
    """The connectors named (all when ``names`` is empty); ClickException naming the known."""
    if not config.connectors:
        raise click.ClickException("the pipeline file configures no connectors")
    if not names:
        return list(config.connectors)
    known = {connector.name: connector for connector in config.connectors}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise click.ClickException(f"no connector named {', '.join(map(repr, unknown))}; "
                                   f"configured: {', '.join(known)}")
    return [known[name] for name in dict.fromkeys(names)]


def run_connectors(config: PipelineConfig, connectors: Sequence[ConnectorConfig],
                   event_log: Log, stop: threading.Event, metrics: RuntimeMetrics,
                   on_start: Callable[[Sequence[ConnectorRunner]], None] | None = None
                   ) -> None:
    """Run ``connectors`` until ``stop`` is set or one fails; drain all of them.

    ``on_start`` gets the started runners (the health endpoint watches them). Raises
    ``ConnectorFailedError`` for the first connector that failed, or ``MissingExtraError``
    when its sink's extra is not installed.
    """
    runners = [ConnectorRunner(connector, event_log, topic_prefix=config.topic_prefix,
                               metrics=metrics) for connector in connectors]
    try:
        for runner in runners:
            runner.start()  # a later one's missing extra: the started ones are stopped
        if on_start is not None:
            on_start(runners)
        while not stop.wait(0.2) and not any(runner.stopping for runner in runners):
            pass
    finally:
        for runner in runners:
            runner.stop()
        for runner in runners:
            runner.join()
    for runner in runners:
        try:
            runner.raise_failure()
        except ConnectorFailedError as failed:
            if isinstance(failed.cause, MissingExtraError):  # one line, not a stack
                raise failed.cause from None
            raise


@click.command()
@config_option
@click.option("--connector", "names", multiple=True, metavar="NAME",
              help="Run only this connector (repeat for several); default: all.")
def connect(config_path: Path, names: tuple[str, ...]) -> None:
    """Feed the configured sinks from the log (each connector is a consumer group)."""
    from cdc.logsetup import protect_secrets
    from cdc.memory import release_free_memory_periodically, spare_the_cycle_collector
    from cdc.observability import start_observability
    from cdc.signals import stop_on_signals

    from .joins.foreign_keys import resolve_foreign_keys_or_exit

    configure_logging()
    config = resolve_foreign_keys_or_exit(load_config_or_exit(config_path))
    protect_secrets(config)
    connectors = select_connectors(config, names)
    metrics = RuntimeMetrics()
    event_log = open_log_or_exit(config.log)
    stop = stop_on_signals()
    release_free_memory_periodically()  # a long run's fragmented heap
    spare_the_cycle_collector()
    observability = None
    try:
        observability = start_observability(config, metrics, connectors=connectors)
        watch = None if observability is None else observability.connectors
        run_connectors(config, connectors, event_log, stop, metrics,
                       on_start=None if watch is None else watch.attach)
    except DistributaryError as exc:
        refused = config_error_in(exc)  # e.g. a password the sink refused at start-up
        if refused is not None:
            which = exc.connector if isinstance(exc, ConnectorFailedError) else "?"
            raise ConfigErrorExit(f"connector {which!r}: {refused}") from None
        raise click.ClickException(str(exc)) from None
    finally:
        if observability is not None:
            observability.stop()
        event_log.close()
