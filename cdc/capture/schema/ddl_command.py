"""``cdc ddl install|uninstall|status -c FILE``: the optional DDL capture (``ddl``)."""

from __future__ import annotations

from pathlib import Path

import click
import psycopg

from cdc.config.commands import config_option, load_config_or_exit
from cdc.errors import DistributaryError

from ..source.messages import ddl_capture_refusal
from . import ddl
from .ddl_drops import DROP_TRIGGER_NAME


@click.group("ddl")
def ddl_group() -> None:
    """Record DDL text in the log (opt-in): event triggers emit each DDL command as a
    logical message; the capture writes it to <prefix>._ddl, and a truncate event on the
    topic of every captured table a DROP removed.

    \b
    Example:
      cdc ddl install -c pipeline.yaml
      cdc ddl status -c pipeline.yaml
      cdc ddl uninstall -c pipeline.yaml
    """


@ddl_group.command()
@config_option
@click.option("--sql", "print_sql", is_flag=True,
              help="Print the SQL instead of running it (for a DBA to run as superuser).")
def install(config_path: Path, print_sql: bool) -> None:
    """Create the event triggers distributary_ddl and distributary_ddl_drop (needs a
    superuser; run it again after an upgrade to add a trigger an older version lacked).

    \b
    Example:
      cdc ddl install -c pipeline.yaml
      cdc ddl install -c pipeline.yaml --sql | psql "$SUPERUSER_DSN"
    """
    if print_sql:
        for statement in ddl.install_statements():
            click.echo(statement.as_string(None) + ";")
        return
    _run(config_path, install=True)
    click.echo(f"installed event trigger {ddl.TRIGGER_NAME} (DDL is recorded on "
               f"<prefix>._ddl from now on) and {DROP_TRIGGER_NAME} (a dropped table gets a "
               "truncate event on its topic)")


@ddl_group.command()
@config_option
def uninstall(config_path: Path) -> None:
    """Drop the event triggers and their functions.

    \b
    Example:
      cdc ddl uninstall -c pipeline.yaml
    """
    _run(config_path, install=False)
    click.echo(f"removed event trigger {ddl.TRIGGER_NAME} and {DROP_TRIGGER_NAME}")


@ddl_group.command()
@config_option
def status(config_path: Path) -> None:
    """Say whether the event triggers are installed and enabled.

    \b
    Example:
      cdc ddl status -c pipeline.yaml
    """
    config = load_config_or_exit(config_path)
    try:
        with psycopg.connect(config.source.conninfo(), autocommit=True) as conn:
            findings = ddl.ddl_trigger_findings(conn)
    except psycopg.Error as exc:
        raise click.ClickException(f"cannot check the database: {type(exc).__name__}") from None
    for finding in findings:
        click.echo(f"{finding.level:5} {finding.check}: {finding.detail}")


def _run(config_path: Path, *, install: bool) -> None:
    config = load_config_or_exit(config_path)
    try:
        with psycopg.connect(config.source.conninfo(), autocommit=True) as conn:
            refusal = ddl_capture_refusal(conn.info.server_version) if install else None
            if refusal is not None:
                raise click.ClickException(refusal)
            (ddl.install if install else ddl.uninstall)(conn)
    except DistributaryError as exc:
        raise click.ClickException(str(exc)) from None
    except psycopg.OperationalError as exc:
        raise click.ClickException(f"cannot connect to the database: {type(exc).__name__}"
                                   ) from None
