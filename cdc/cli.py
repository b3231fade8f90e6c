"""The ``cdc`` command. Each command lives beside the code it drives and is added here.

This module and ``cdc.pipeline`` are the composition root (docs/architecture.md,
"Layers"): the only modules under ``cdc/`` that may reach the layers above the core,
and only lazily, so that an absent extra costs just the commands that need it.
"""

from __future__ import annotations

import click

from cdc.capture.commands import capture, doctor
from cdc.capture.schema.ddl_command import ddl_group
from cdc.capture.schema.event_schema_command import event_schema
from cdc.capture.snapshot.command import snapshot
from cdc.config.commands import config_schema, validate
from cdc.help_examples import add_examples
from cdc.lazy_group import LazyCommand, LazyGroup
from cdc.log.commands import log_group
from cdc.logsetup import LogFormat, set_log_format
from cdc.memory import keep_freed_memory
from cdc.pipeline import run

LAYERED_COMMANDS = (
    LazyCommand("connect", "connectors.commands:connect",
                "Feed the configured sinks from the log."),
    LazyCommand("reconcile", "connectors.reconcile.command:reconcile",
                "Compare the sinks with the database; repair drift."),
    LazyCommand("replay", "spark_pipelines.commands:replay",
                "Spark jobs over the log: materialize, state-as-of, rebuild..."),
)


def _add_example(command: click.Command, name: str) -> None:
    add_examples(command, (name,))


@click.group(cls=LazyGroup, lazy_commands=LAYERED_COMMANDS, on_load=_add_example,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="distributary")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, envvar="DISTRIBUTARY_LOG_FORMAT",
              help="text lines, or one JSON object per line (ts, level, logger, message, "
              "fields).")
def main(log_format: LogFormat) -> None:
    """Distributary: change-data-capture from PostgreSQL into a replayable event log."""
    set_log_format(log_format)
    keep_freed_memory()  # per-batch buffers are reused, not faulted in again


main.add_command(validate)
main.add_command(config_schema)
main.add_command(event_schema)
log_group.add_lazy(LazyCommand("columnar", "spark_pipelines.columnar_command:columnar",
                               "Write Parquet companions of sealed segments for the Spark "
                               "jobs."))
main.add_command(log_group)
main.add_command(capture)
main.add_command(doctor)
main.add_command(run)
main.add_command(snapshot)
main.add_command(ddl_group)
add_examples(main)  # last: every eager command is registered by now; lazy ones on load


if __name__ == "__main__":
    main()
