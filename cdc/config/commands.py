"""``cdc validate`` and ``cdc config-schema``, and the ``-c FILE`` option other commands share."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import click

from cdc.config.loader import load_config
from cdc.config.models import PipelineConfig
from cdc.config.schema import config_json_schema
from cdc.errors import ConfigError
from cdc.plugins.index import SinkLoadError

EXIT_CONFIG_ERROR = 2
DEFAULT_CONFIG = "pipeline.yaml"

F = TypeVar("F", bound=Callable[..., object])


def config_option(command: F) -> F:
    """``-c/--config FILE`` (default ``pipeline.yaml``, or ``$DISTRIBUTARY_CONFIG``)."""
    option = click.option(
        "-c", "--config", "config_path", type=click.Path(path_type=Path),
        default=DEFAULT_CONFIG, show_default=True, envvar="DISTRIBUTARY_CONFIG",
        help="The pipeline file.")
    return option(command)


class ConfigErrorExit(click.ClickException):
    """A configuration error found while running (e.g. a password the server refused):
    ``Error: <setting>: <problem>`` on standard error, exit status 2."""

    exit_code = EXIT_CONFIG_ERROR


def exit_with_problems(error: ConfigError) -> NoReturn:
    """Print one line per problem of ``error`` and exit with status 2."""
    for problem in error.problems:
        click.echo(str(problem))
    sys.exit(EXIT_CONFIG_ERROR)


def load_config_or_exit(config_path: Path) -> PipelineConfig:
    """Load the pipeline file, or print one line per problem and exit with status 2."""
    try:
        return load_config(config_path)
    except ConfigError as error:
        exit_with_problems(error)


@click.command()
@config_option
def validate(config_path: Path) -> None:
    """Check a pipeline file: print `ok`, or one line per problem (exit status 2)."""
    load_config_or_exit(config_path)
    click.echo("ok")


@click.command("config-schema")
def config_schema() -> None:
    """Print the JSON Schema of pipeline files (for editors and CI)."""
    try:
        schema = config_json_schema()
    except SinkLoadError as error:
        click.echo(str(error), err=True)
        sys.exit(EXIT_CONFIG_ERROR)
    click.echo(json.dumps(schema, indent=2))
