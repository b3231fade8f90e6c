"""What ``cdc run`` tells each child through its environment."""

from __future__ import annotations

SUPERVISOR_PID_ENV = "DISTRIBUTARY_SUPERVISOR_PID"  # the supervisor's pid (its parent)
