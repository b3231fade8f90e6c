"""The chaos harness: the whole pipeline under a mixed workload while faults hit it.

``python -m chaos [--duration S] [--short] [--seed N]`` (``make chaos``) starts its own
PostgreSQL, Redis and OpenSearch, runs ``cdc capture`` and ``cdc connect`` as child
processes on a file log in a small filesystem of its own, writes to a schema with
composite keys and TOAST-sized values, and meanwhile kills the capture and the
connectors (SIGKILL), stops OpenSearch and Redis, restarts PostgreSQL and fills the
log's disk. At the end it compares the log with an audit table filled by triggers (the
ground truth, independent of the capture) and both sinks with the final tables (with
``cdc reconcile``'s check, whose summary line it prints just before its own). Its last
line is ``chaos: runs=N faults=M lost=X duplicated=Y diverged=Z``.

Modules: ``servers`` (own servers, OpenSearch that can stop and come back), ``diskfill``
(the small filesystem), ``schema`` (tables and audit triggers), ``workload`` (the
writer), ``processes`` (supervised ``cdc`` children), ``faults`` (the schedule),
``verify`` (the checks), ``harness`` (one run), ``fuzz_pgoutput`` (atheris target).
"""
