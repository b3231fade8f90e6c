"""``cdc capture -c FILE``: run the capture alone until SIGTERM or Ctrl-C."""

from __future__ import annotations

import errno
from pathlib import Path

import click
import psycopg

from cdc.config.commands import ConfigErrorExit, config_option, load_config_or_exit
from cdc.errors import ConfigError, DistributaryError
from cdc.log.target import open_log_or_exit
from cdc.logsetup import configure_logging, protect_secrets
from cdc.memory import release_free_memory_periodically, spare_the_cycle_collector
from cdc.signals import stop_on_signals

from .runner import Capture, CaptureSettings
from .source.checks import without_secrets

# ``cdc capture`` and ``cdc run``: what to do about a lost or missing slot
recreate_lost_slot_option = click.option(
    "--recreate-lost-slot", is_flag=True,
    help="If the slot is lost (wal_status=lost) or missing (dropped, or a failover to a "
    "server without it), drop it if need be, create a new one and snapshot the tables "
    "again (truncate events first) instead of stopping with an error.")


@click.command()
@config_option
@recreate_lost_slot_option
def capture(config_path: Path, recreate_lost_slot: bool) -> None:
    """Stream the configured slot into the log (logs LSN, events and acknowledgements)."""
    from cdc.observability import start_observability

    configure_logging()
    config = load_config_or_exit(config_path)
    protect_secrets(config)
    event_log = open_log_or_exit(config.log)
    stop = stop_on_signals()
    release_free_memory_periodically()  # a long run's fragmented heap
    spare_the_cycle_collector()  # a batch's records die young (~4 % of a spread batch's CPU)
    settings = CaptureSettings(recreate_lost_slot=recreate_lost_slot,
                               takeover_after_s=config.capture.takeover_after.total_seconds())
    observability = None
    try:
        runner = Capture(config, event_log, settings)  # a file log refuses a second one
        observability = start_observability(config, capture=runner.stats)
        runner.run(stop)
    except ConfigError as exc:  # e.g. PostgreSQL refused the password at start-up
        raise ConfigErrorExit(str(exc)) from None
    except DistributaryError as exc:
        raise click.ClickException(str(exc)) from None
    except psycopg.errors.InsufficientPrivilege as exc:
        raise click.ClickException(
            f"permission denied: {exc.diag.message_primary}; 'cdc doctor -c {config_path}' "
            "names the missing privilege and the GRANT that fixes it") from None
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        raise click.ClickException(
            f"the log's disk is full ({config.log.path}): nothing written after the last "
            "durable append was acknowledged to PostgreSQL, which keeps the WAL; free space "
            "(or raise the filesystem's size) and start the capture again") from None
    finally:
        if observability is not None:
            observability.stop()
        event_log.close()


@click.command()
@config_option
def doctor(config_path: Path) -> None:
    """Check wal_level, privileges, replica identity and the slot; print fixes."""
    from .doctor import diagnose

    config = load_config_or_exit(config_path)
    try:
        findings = diagnose(config)
    except psycopg.Error as exc:  # e.g. unreachable, TLS verification, authentication
        raise click.ClickException(f"cannot check the database: "
                                   f"{without_secrets(str(exc), config.source)}") from None
    except Exception as exc:  # a connection failure is the finding here
        raise click.ClickException(f"cannot check the database: {type(exc).__name__}") from None
    for finding in findings:
        line = f"{finding.level:5} {finding.check}: {finding.detail}"
        click.echo(line + (f"\n      fix: {finding.fix}" if finding.fix else ""))
    if any(f.level == "error" for f in findings):
        raise SystemExit(1)
