"""One child process of ``cdc run``: started, its stderr passed on, stopped.

A child is ``python -m cdc.supervisor.child --log-format F ARGS`` (``cdc ARGS`` with exit
statuses the supervisor can act on), in its own session so that a Ctrl-C in the terminal
reaches the supervisor alone, which then stops the children in order. Its stderr goes
through the supervisor line by line: JSON lines as they are (a line that is not JSON
becomes a JSON record of the supervisor's log: at ERROR for click's ``Error: …`` and a
Python traceback's first line, at WARNING for anything else, such as a JVM's notices),
text lines prefixed with the child's name.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from cdc.logsetup import LogFormat
from cdc.observability.launch import CHILD_ENDPOINT_ENV
from cdc.supervisor.child_env import SUPERVISOR_PID_ENV

log = logging.getLogger(__name__)

_KEPT_LINES = 20
_write_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """A child to run: ``name`` (``capture``, ``connector <name>``) and its ``cdc`` args;
    ``serves_endpoint``: whether it publishes a metrics endpoint (``cdc log columnar``
    does not: it is healthy while it runs)."""

    name: str
    args: tuple[str, ...]
    serves_endpoint: bool = True


class ChildProcess:
    """A started child. ``endpoint_file``: where it publishes its metrics port, if any."""

    def __init__(self, spec: ChildSpec, log_format: LogFormat,
                 endpoint_file: Path | None = None) -> None:
        self.spec = spec
        self.endpoint_file = endpoint_file
        self._json = log_format == "json"
        self._lines: deque[str] = deque(maxlen=_KEPT_LINES)
        env = dict(os.environ)
        env.pop(CHILD_ENDPOINT_ENV, None)
        env[SUPERVISOR_PID_ENV] = str(os.getpid())  # its parent, even if it dies at once
        if endpoint_file is not None:
            endpoint_file.unlink(missing_ok=True)
            env[CHILD_ENDPOINT_ENV] = str(endpoint_file)
        argv = [sys.executable, "-m", "cdc.supervisor.child", "--log-format", log_format,
                *spec.args]
        self._process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, start_new_session=True)
        assert self._process.stderr is not None
        self._pump = threading.Thread(target=self._pass_on, args=(self._process.stderr,),
                                      name=f"stderr {spec.name}", daemon=True)
        self._pump.start()

    @property
    def pid(self) -> int:
        return self._process.pid

    def poll(self) -> int | None:
        """The exit status once it exited (negative: killed by that signal), else None."""
        return self._process.poll()

    def port(self) -> int | None:
        """The port of its metrics endpoint on 127.0.0.1, once it published it."""
        if self.endpoint_file is None:
            return None
        try:
            return int(self.endpoint_file.read_text())
        except (OSError, ValueError):
            return None

    def last_error(self) -> str | None:
        """Its last line of output that reads as an error (click's ``Error: …``, a record
        at level ERROR), for the supervisor's own message; else its last line."""
        lines = list(self._lines)
        for line in reversed(lines):
            if line.startswith("Error: "):
                return line.removeprefix("Error: ")
        return lines[-1] if lines else None

    def signal(self, signum: int) -> None:
        """Send ``signum`` unless it already exited."""
        self._process.send_signal(signum)  # a no-op once it exited and was waited for

    def wait(self, timeout_s: float) -> int | None:
        """Its exit status within ``timeout_s``, else None."""
        try:
            status = self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        self._pump.join(timeout=1.0)  # the last lines it wrote
        return status

    def kill(self) -> int:
        """SIGKILL, and its exit status."""
        self.signal(signal.SIGKILL)
        return self._process.wait()

    def _pass_on(self, stream: IO[bytes]) -> None:
        with stream:
            for raw in stream:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line:
                    self._forward(line)

    def _forward(self, line: str) -> None:
        if not self._json:
            self._lines.append(line)
            _write(f"{self.spec.name}: {line}\n")
            return
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            self._lines.append(line)
            # not a log record: an error where click or Python says so, else a warning (a
            # JVM's or a library's notice on stderr is no error of the pipeline)
            level = logging.ERROR if line.startswith(("Error: ", "Traceback ")) \
                else logging.WARNING
            log.log(level, "%s", line, extra={"child": self.spec.name})
            return
        if record.get("level") in ("ERROR", "CRITICAL"):
            self._lines.append(str(record.get("message", "")))
        _write(line + "\n")


def _write(text: str) -> None:
    with _write_lock:
        sys.stderr.write(text)
        sys.stderr.flush()


def child_specs(config_path: Path, connectors: Sequence[str], *,
                recreate_lost_slot: bool, reconcile: bool = False,
                columnar_every: float | None = None, lakehouse_every: float | None = None,
                lakehouse_master: str = "local[1]") -> list[ChildSpec]:
    """The children of ``cdc run``: the capture, then one per connector, then with
    ``reconcile`` (a ``reconcile:`` section) ``cdc reconcile --continuous``, then with
    ``columnar_every`` (``spark.columnar_every``) ``cdc log columnar --every``, then with
    ``lakehouse_every`` ``cdc replay materialize --format delta --every`` on
    ``lakehouse_master``."""
    config = ("-c", str(config_path))
    capture = ("capture", *config, *(("--recreate-lost-slot",) if recreate_lost_slot else ()))
    return [ChildSpec("capture", capture),
            *(ChildSpec(f"connector {name}", ("connect", *config, "--connector", name))
              for name in connectors),
            *([ChildSpec("reconcile", ("reconcile", *config, "--continuous"))]
              if reconcile else []),
            *([ChildSpec("columnar", ("log", "columnar", *config, "--every",
                                      f"{columnar_every:g}"), serves_endpoint=False)]
              if columnar_every is not None else []),
            *([ChildSpec("lakehouse", ("replay", "materialize", *config, "--format", "delta",
                                       "--every", f"{lakehouse_every:g}", "--master",
                                       lakehouse_master, "--no-progress"),
                         serves_endpoint=False)]
              if lakehouse_every is not None else [])]
