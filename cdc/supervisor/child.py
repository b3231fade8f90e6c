"""``python -m cdc.supervisor.child ARGS``: ``cdc ARGS`` as a child of ``cdc run``.

Two differences from ``cdc ARGS``, both for the supervisor:

- the exit status tells a failure a restart cannot fix: 2 for a usage, configuration or
  installation problem (as ``cdc`` does), ``EXIT_TERMINAL`` (3) when the error behind the
  command's failure is a ``TerminalError`` (a lost slot, a corrupt log, undecodable WAL, a
  missing privilege); any other failure exits 1 and is restarted;
- the child stops cleanly (as on SIGTERM) when its parent is gone, so a supervisor killed
  with SIGKILL leaves no orphan streaming from the slot. The supervisor names itself in
  ``DISTRIBUTARY_SUPERVISOR_PID``: killed before the child even started, the child's
  parent would already be init, and watching that would never end.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import click

from cdc.supervisor.child_env import SUPERVISOR_PID_ENV
from cdc.supervisor.exits import EXIT_TERMINAL, EXIT_USAGE, is_terminal

_PARENT_POLL_S = 0.5


def supervisor_pid() -> int:
    """The pid of the ``cdc run`` that started this process (its parent while it lives)."""
    named = os.environ.get(SUPERVISOR_PID_ENV, "")
    return int(named) if named.isdigit() else os.getppid()


def stop_when_orphaned(parent: int) -> threading.Thread:
    """A daemon thread that sends this process SIGTERM once ``parent`` is not its parent
    (at once if it is not now)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread


def run_child(args: list[str]) -> int:
    """Run ``cdc args``; the exit status as described above."""
    from cdc.cli import main

    try:
        result = main.main(args=args, prog_name="cdc", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        if exc.exit_code == EXIT_USAGE:  # e.g. a password PostgreSQL refused at start-up
            return EXIT_USAGE
        return EXIT_TERMINAL if is_terminal(exc) else exc.exit_code
    except click.Abort:
        click.echo("Aborted!", err=True)
        return 1
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    stop_when_orphaned(supervisor_pid())
    sys.exit(run_child(sys.argv[1:]))
