"""The ``cdc`` command. Each command lives beside the code it drives and is added here."""

from __future__ import annotations

import click

from cdc.capture.commands import capture, doctor
from cdc.config.commands import config_schema, validate
from cdc.log.commands import log_group
from cdc.pipeline import run
from connectors.commands import connect


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="distributary")
def main() -> None:
    """Distributary: change-data-capture from PostgreSQL into a replayable event log."""


main.add_command(validate)
main.add_command(config_schema)
main.add_command(log_group)
main.add_command(capture)
main.add_command(doctor)
main.add_command(connect)
main.add_command(run)


if __name__ == "__main__":
    main()
