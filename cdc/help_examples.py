"""The ``Example`` block of each command's ``--help`` (click epilogs, added in one place).

Commands that already show an example in their docstring or epilog keep their own.
"""

from __future__ import annotations

import click

EXAMPLES: dict[tuple[str, ...], tuple[str, ...]] = {
    (): ("cdc validate -c pipeline.yaml",
         "cdc --log-format json run -c pipeline.yaml"),
    ("validate",): ("cdc validate -c compose/pipeline.yaml",),
    ("config-schema",): ("cdc config-schema > pipeline.schema.json",),
    ("log",): ("cdc log topics -c pipeline.yaml",
               "cdc log tail app.public.orders --path .data/log"),
    ("log", "topics"): ("cdc log topics -c pipeline.yaml",),
    ("log", "dump"): ("cdc log dump app.public.orders --path .data/log --from 0 --to 100",),
    ("log", "tail"): ("cdc log tail app.public.orders -c pipeline.yaml --group debug",),
    ("log", "stats"): ("cdc log stats --path .data/log",),
    ("log", "verify"): ("cdc log verify -c pipeline.yaml",),
    ("log", "repair"): ("cdc log repair --path .data/log --yes",),
    ("capture",): ("cdc capture -c pipeline.yaml",
                   "cdc capture -c pipeline.yaml --recreate-lost-slot"),
    ("doctor",): ("cdc doctor -c pipeline.yaml",),
    ("connect",): ("cdc connect -c pipeline.yaml",
                   "cdc connect -c pipeline.yaml --connector search --connector cache"),
    ("run",): ("cdc run -c pipeline.yaml",
               "curl -s http://127.0.0.1:9187/healthz   # with metrics: {port: 9187}"),
}


def has_example(command: click.Command) -> bool:
    """True when the command's help text or epilog shows an example."""
    return "Example" in f"{command.help or ''}\n{command.epilog or ''}"


def example_epilog(lines: tuple[str, ...]) -> str:
    """An epilog click prints verbatim: ``Example:`` then the command lines, indented."""
    title = "Example:" if len(lines) == 1 else "Examples:"
    return "\b\n" + "\n".join([title, *(f"  {line}" for line in lines)])


def add_examples(command: click.Command, path: tuple[str, ...] = ()) -> None:
    """Give ``command`` and its subcommands their example, unless they have their own."""
    lines = EXAMPLES.get(path)
    if lines and not has_example(command):
        command.epilog = example_epilog(lines)
    if isinstance(command, click.Group):
        for name, subcommand in command.commands.items():
            add_examples(subcommand, (*path, name))
