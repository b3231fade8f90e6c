"""A click group whose commands from the layers above the core are imported on first use.

``cdc --help`` lists them from a one-line summary without importing them. When a
command's module cannot be imported because an optional extra is missing, the command
becomes one that prints ``cdc replay needs the spark extra: pip install
'distributary[spark]'`` and exits with status 2 — never a traceback. So does any command
that raises ``MissingExtraError`` (a Kafka log without the kafka extra).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import click

from cdc.extras import MissingExtraError, install_hint, missing_extra

EXIT_MISSING_EXTRA = 2


@dataclass(frozen=True, slots=True)
class LazyCommand:
    """A command found at ``target`` (``"package.module:attribute"``) when first used."""

    name: str
    target: str
    summary: str


def _exit_missing_extra(error: MissingExtraError) -> NoReturn:
    click.echo(str(error), err=True)
    sys.exit(EXIT_MISSING_EXTRA)


def _needs_extra_command(lazy: LazyCommand, extra: str) -> click.Command:
    def fail(**_: Any) -> NoReturn:
        _exit_missing_extra(MissingExtraError(f"cdc {lazy.name}", extra))

    return click.Command(
        lazy.name, callback=fail, add_help_option=False,
        help=f"{lazy.summary} Needs the {extra} extra: {install_hint(extra)}.",
        short_help=f"{lazy.summary} (needs the {extra} extra)",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


class LazyGroup(click.Group):
    """A group with eager commands (``add_command``) and lazy ones (``lazy_commands``)."""

    def __init__(self, *args: Any, lazy_commands: Sequence[LazyCommand] = (),
                 on_load: Callable[[click.Command, str], None] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = {lazy.name: lazy for lazy in lazy_commands}
        self._on_load = on_load

    def add_lazy(self, lazy: LazyCommand) -> None:
        """Add a command imported on first use."""
        self.lazy_commands[lazy.name] = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command name, the lazy ones included, without importing them."""
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, importing a lazy one the first time it is asked for."""
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            self.add_command(self._load(self.lazy_commands[cmd_name]), cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a ``MissingExtraError`` it raises becomes one line, status 2."""
        try:
            return super().invoke(ctx)
        except MissingExtraError as error:
            _exit_missing_extra(error)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``; a lazy command not loaded yet shows its summary."""
        limit = formatter.width - 6 - max(len(name) for name in self.list_commands(ctx))
        rows: list[tuple[str, str]] = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is None:
                rows.append((name, self.lazy_commands[name].summary))
            elif not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def _load(self, lazy: LazyCommand) -> click.Command:
        module_name, attribute = lazy.target.split(":", 1)
        try:
            command = getattr(importlib.import_module(module_name), attribute)
        except ImportError as exc:
            extra = missing_extra(exc)
            if extra is None:
                raise
            return _needs_extra_command(lazy, extra)
        if not isinstance(command, click.Command):
            raise TypeError(f"{lazy.target} is a {type(command).__name__}, not a click command")
        if self._on_load is not None:
            self._on_load(command, lazy.name)
        return command
