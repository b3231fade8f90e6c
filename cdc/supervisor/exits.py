"""Exit statuses of ``cdc run``'s children, and which failures a restart cannot fix."""

from __future__ import annotations

from cdc.errors import TerminalError

EXIT_USAGE = 2  # usage, configuration or installation: what ``cdc`` exits with for them
EXIT_TERMINAL = 3  # an error behind the failure is a ``TerminalError``
FATAL_STATUSES = frozenset({EXIT_USAGE, EXIT_TERMINAL})


def is_terminal(error: BaseException) -> bool:
    """True when ``error`` or an error it was raised from or during is a ``TerminalError``."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, TerminalError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
