"""``rebuild-cache``: Redis repopulated from the materialized state through the connector's
own ``RedisSink`` — the same views, key templates, value format and Lua version guard.

The table's last truncate (if any) goes first, then the last event of every key after
it, deletes included: each write is the guarded compare-and-set, so a value the
streaming connector wrote from a newer event stays, a replayed truncate already done
does nothing, and running the rebuild while the connector runs is safe.
"""

from __future__ import annotations

import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from connectors.redis.config import RedisSinkConfig
from connectors.redis.sink import RedisSink

from .materialize import OP_COLUMN
from .materialize_job import TableResult
from .sink_events import state_events
from .source import LogSource
from .state import ReplayError, TableHistory, text_state

BATCH = 500


def rebuild_cache_table(spark: SparkSession, source: LogSource, history: TableHistory,
                        config: RedisSinkConfig) -> TableResult:
    """Write one table's state through a ``RedisSink`` (see the module docstring)."""
    started = time.perf_counter()
    topic = source.topic(history.name)
    state = text_state(spark, source, history, source.end_offsets(topic), with_deletes=True)
    sink = RedisSink(config, topic_prefix=source.topic_prefix)
    sink.open()
    written = deleted = 0
    try:
        for part in (state.where(F.col(OP_COLUMN) == "t"), state.where(F.col(OP_COLUMN) != "t")):
            for batch in state_events(part, history, topic, BATCH):
                result = sink.write(batch)
                if result.rejected:
                    first = result.rejected[0]
                    raise ReplayError(f"Redis refused {len(result.rejected)} write(s) of "
                                      f"{history.name}, for example key {first.event.key}: "
                                      f"{first.reason}")
                deleted += sum(1 for event in batch if event.op == "d")
                written += sum(1 for event in batch if event.op in ("c", "u", "r"))
    finally:
        sink.close()
        spark.catalog.clearCache()
    return TableResult(history.name, written, "-", _describe(config, deleted),
                       time.perf_counter() - started)


def _describe(config: RedisSinkConfig, deleted: int) -> str:
    return f"redis {config.key_template} ({deleted} deletes replayed)"
