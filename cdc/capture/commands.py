"""``cdc capture -c FILE``: run the capture alone until SIGTERM or Ctrl-C."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import click

from cdc.config.commands import config_option, load_config_or_exit
from cdc.errors import DistributaryError
from cdc.log.open import open_log
from cdc.logsetup import configure_logging

from .runner import Capture


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (the capture then flushes and stops)."""
    stop = threading.Event()

    def _handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)
    return stop


@click.command()
@config_option
def capture(config_path: Path) -> None:
    """Stream the configured slot into the log (logs LSN, events and acknowledgements)."""
    configure_logging()
    config = load_config_or_exit(config_path)
    event_log = open_log(config.log)
    stop = stop_on_signals()
    try:
        Capture(config, event_log).run(stop)
    except DistributaryError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        event_log.close()


@click.command()
@config_option
def doctor(config_path: Path) -> None:
    """Check wal_level, privileges, replica identity and the slot; print fixes."""
    from .doctor import diagnose

    config = load_config_or_exit(config_path)
    try:
        findings = diagnose(config)
    except Exception as exc:  # a connection failure is the finding here
        raise click.ClickException(f"cannot check the database: {type(exc).__name__}") from None
    for finding in findings:
        line = f"{finding.level:5} {finding.check}: {finding.detail}"
        click.echo(line + (f"\n      fix: {finding.fix}" if finding.fix else ""))
    if any(f.level == "error" for f in findings):
        raise SystemExit(1)
