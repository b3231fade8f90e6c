"""``cdc run -c FILE``: the capture and the connectors in one process.

The capture streams into the log in a thread; the connectors read the log in theirs.
SIGTERM or Ctrl-C stops both: the capture flushes and acknowledges what is durable, each
connector finishes its batch, flushes its sink and commits its offsets.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import click

from cdc.capture.commands import stop_on_signals
from cdc.capture.runner import Capture
from cdc.config.commands import config_option, load_config_or_exit
from cdc.errors import DistributaryError
from cdc.log.open import open_log
from cdc.logsetup import configure_logging

log = logging.getLogger(__name__)


@click.command()
@config_option
def run(config_path: Path) -> None:
    """Capture changes into the log and feed every configured connector."""
    from connectors.commands import run_connectors
    from connectors.runtime import RuntimeMetrics

    configure_logging()
    config = load_config_or_exit(config_path)
    event_log = open_log(config.log)
    stop = stop_on_signals()
    failure: list[BaseException] = []
    capture = Capture(config, event_log)

    def capture_thread() -> None:
        try:
            capture.run(stop)
        except BaseException as exc:  # reported below, after the connectors drained
            failure.append(exc)
            stop.set()

    thread = threading.Thread(target=capture_thread, name="capture")
    metrics = RuntimeMetrics()
    if config.metrics is not None:
        from prometheus_client import start_http_server

        start_http_server(config.metrics.port, config.metrics.host, registry=metrics.registry)
    thread.start()
    try:
        if config.connectors:
            run_connectors(config, list(config.connectors), event_log, stop, metrics)
        else:
            stop.wait()
    except DistributaryError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        stop.set()
        thread.join()
        event_log.close()
    if failure:
        raise click.ClickException(f"the capture failed: {failure[0]}")
