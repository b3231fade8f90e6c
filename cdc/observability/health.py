"""``/healthz``: ready when the capture streams and every connector runs.

Each part of the process reports a ``PartHealth``; ``readiness`` combines them into the
HTTP status and the JSON body (200 ``{"status": "ready", …}``, else 503 with reasons).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

READY = 200
NOT_READY = 503


@dataclass(frozen=True, slots=True)
class PartHealth:
    """One part (``capture`` or ``connector <name>``): its state, and why it is not ready."""

    name: str
    state: str
    problem: str | None = None

    @property
    def ready(self) -> bool:
        return self.problem is None


def readiness(parts: Sequence[PartHealth]) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body of ``/healthz`` for these parts (none: not ready)."""
    states = {part.name: part.state for part in parts}
    reasons = [f"{part.name}: {part.problem}" for part in parts if part.problem is not None]
    if not parts:
        reasons = ["nothing is running yet"]
    if reasons:
        return NOT_READY, {"status": "not ready", "reasons": reasons, "parts": states}
    return READY, {"status": "ready", "parts": states}
