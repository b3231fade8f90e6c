"""``make demo``: the main job end to end on the embedded file log.

Local PostgreSQL, Redis and OpenSearch (or the servers named by ``DISTRIBUTARY_TEST_*``),
a shop schema, ``cdc run`` with ``compose/pipeline.yaml``, a minute of writes with a live
view, ``cdc reconcile`` over OpenSearch and Redis (its summary line is printed before
the last), a Spark job that materializes the tables from the log, and a row-for-row
comparison of its output. Last line: ``demo: events=N consistent=yes`` (or ``no`` and
why).
"""

from .runner import DemoResult, run_demo

__all__ = ["DemoResult", "run_demo"]
