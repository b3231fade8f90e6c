"""``cdc run -c FILE``: the capture and the connectors in one process.

The capture streams into the log in a thread; the connectors read the log in theirs.
SIGTERM or Ctrl-C stops both: the capture flushes and acknowledges what is durable, each
connector finishes its batch, flushes its sink and commits its offsets. With a
``metrics:`` section, ``/metrics``, ``/healthz`` and the status page are served.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import click

from cdc.capture.commands import stop_on_signals
from cdc.capture.runner import Capture, CaptureSettings
from cdc.config.commands import config_option, load_config_or_exit
from cdc.errors import DistributaryError
from cdc.log.open import open_log
from cdc.logsetup import configure_logging, protect_secrets

log = logging.getLogger(__name__)


@click.command()
@config_option
@click.option("--recreate-lost-slot", is_flag=True,
              help="If the slot is lost (wal_status=lost), drop it, create a new one and "
              "snapshot the tables again instead of stopping with an error.")
def run(config_path: Path, recreate_lost_slot: bool) -> None:
    """Capture changes into the log and feed every configured connector."""
    from cdc.observability import start_observability
    from connectors.commands import run_connectors
    from connectors.runtime import RuntimeMetrics

    configure_logging()
    config = load_config_or_exit(config_path)
    protect_secrets(config)
    event_log = open_log(config.log)
    stop = stop_on_signals()
    failure: list[BaseException] = []
    capture = Capture(config, event_log, CaptureSettings(recreate_lost_slot=recreate_lost_slot))

    def capture_thread() -> None:
        try:
            capture.run(stop)
        except BaseException as exc:  # reported below, after the connectors drained
            failure.append(exc)
            stop.set()

    thread = threading.Thread(target=capture_thread, name="capture")
    metrics = RuntimeMetrics()
    thread.start()
    observability = None
    try:
        observability = start_observability(config, metrics, capture=capture.stats,
                                            capture_alive=thread.is_alive,
                                            connectors=config.connectors)
        if config.connectors:
            watch = observability.connectors if observability is not None else None
            run_connectors(config, list(config.connectors), event_log, stop, metrics,
                           on_start=None if watch is None else watch.attach)
        else:
            stop.wait()
    except DistributaryError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        stop.set()
        thread.join()
        if observability is not None:
            observability.stop()
        event_log.close()
    if failure:
        raise click.ClickException(f"the capture failed: {failure[0]}")
