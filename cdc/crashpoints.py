"""Named crash points for fault-injection tests.

``DISTRIBUTARY_CRASH_AT=NAME:N`` makes the process kill itself (SIGKILL, like a power
cut for the process) the N-th time it reaches crash point NAME. Unset, a crash point
costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

_SPEC = os.environ.get("DISTRIBUTARY_CRASH_AT", "")
_NAME, _, _COUNT = _SPEC.partition(":")
_remaining = int(_COUNT or "1") if _NAME else 0


def crash_point(name: str) -> None:
    """Die here if the environment asks for it (see the module docstring)."""
    global _remaining
    if name != _NAME:
        return
    _remaining -= 1
    if _remaining <= 0:
        os.kill(os.getpid(), signal.SIGKILL)
