"""``cdc run`` as a supervisor: the capture and each connector in a child process.

Separate processes keep a busy connector from slowing the capture (and the other way
round): they share no interpreter lock. ``process`` starts a child and passes its stderr
on; ``supervisor`` restarts a child that exits with backoff and stops them all;
``child`` is the children's entry point (exit statuses a supervisor can act on);
``view`` and ``endpoint`` serve one ``/metrics``, ``/healthz`` and status page for the
whole pipeline, put together from the children's own endpoints on 127.0.0.1.
"""

from .endpoint import PipelineEndpoint
from .process import ChildProcess, ChildSpec, child_specs
from .supervisor import Backoff, ChildExit, ChildState, Supervisor
from .view import ChildEndpoints, PipelineView

__all__ = ["Backoff", "ChildEndpoints", "ChildExit", "ChildProcess", "ChildSpec",
           "ChildState", "PipelineEndpoint", "PipelineView", "Supervisor", "child_specs"]
