"""The progress bars of long commands (a snapshot's tables, a Spark job's stages): one
look for all of them, drawn with ``rich`` on a terminal."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def progress_bars(console: Console, *, remaining: bool = False,
                  transient: bool = False) -> Progress:
    """Bars of "description, bar, done of total, time elapsed" (and the time left, with
    ``remaining``: for totals known ahead); ``transient`` ones vanish when stopped."""
    columns: list[ProgressColumn] = [TextColumn("{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn()]
    if remaining:
        columns.append(TimeRemainingColumn())
    return Progress(*columns, console=console, transient=transient)
