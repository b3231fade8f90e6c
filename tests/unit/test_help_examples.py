"""Every ``cdc`` command's ``--help`` shows an example."""

from __future__ import annotations

from collections.abc import Iterator

import click
from click.testing import CliRunner

from cdc.cli import main


def commands(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command path, the lazily loaded groups (``connect``, ``replay``) included."""
    yield path
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            subcommand = command.get_command(context, name)
            assert subcommand is not None, name
            yield from commands(subcommand, (*path, name))


def test_every_command_help_shows_an_example() -> None:
    paths = list(commands(main))
    assert ("run",) in paths and ("log", "tail") in paths
    assert ("connect",) in paths and ("replay", "materialize") in paths
    runner = CliRunner()
    missing = []
    for path in paths:
        result = runner.invoke(main, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        if "Example" not in result.output:
            missing.append(" ".join(("cdc", *path)))
    assert not missing, f"--help without an example: {missing}"


def test_examples_are_printed_verbatim() -> None:
    output = CliRunner().invoke(main, ["log", "dump", "--help"]).output
    assert "\n  Example:\n    cdc log dump app.public.orders --path .data/log" in output
