"""What one ``cdc doctor`` check found, and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cdc.errors import TerminalError

Level = Literal["ok", "warn", "error"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One check's outcome; ``fix`` is the SQL (or step) that repairs it."""

    level: Level
    check: str
    detail: str
    fix: str = ""


class MissingPrivilegeError(TerminalError):
    """The capture's role may not do something it needs; the message names the fix."""
