"""Exit statuses of ``cdc run``'s children, and which failures a restart cannot fix."""

from __future__ import annotations

from cdc.errors import TerminalError, behind

EXIT_USAGE = 2  # usage, configuration or installation: what ``cdc`` exits with for them
EXIT_TERMINAL = 3  # an error behind the failure is a ``TerminalError``
FATAL_STATUSES = frozenset({EXIT_USAGE, EXIT_TERMINAL})


def is_terminal(error: BaseException) -> bool:
    """True when ``error`` or an error it was raised from or during is a ``TerminalError``."""
    return behind(error, TerminalError) is not None
