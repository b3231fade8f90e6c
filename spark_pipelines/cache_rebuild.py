"""``rebuild-cache``: Redis repopulated from the materialized state through the connector's
own ``RedisSink`` — the same views, key templates, value format and Lua version guard —
one sink per Spark task, each writing its partition of the state (``task_writes``).

The table's last truncate (if any) goes first, then the last event of every key after
it, deletes included: each write is the guarded compare-and-set, so a value the
streaming connector wrote from a newer event stays, a replayed truncate already done
does nothing, and running the rebuild while the connector runs is safe.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from connectors.contract import Sink, SinkEvent
from connectors.redis.config import RedisSinkConfig
from connectors.redis.sink import RedisSink

from .materialize import OP_COLUMN
from .materialize_job import TableResult
from .source import LogSource
from .state import TableHistory, text_state
from .task_writes import ShippedConfig, StateFeed, Targets, TaskCounts, spread, write_from_tasks

BATCH = 500
WRITTEN = "written"


@dataclass(frozen=True, slots=True)
class CacheRecipe:
    """A task's ``RedisSink``, counting the values it writes (not deletes, truncates)."""

    config: ShippedConfig[RedisSinkConfig]
    topic_prefix: str

    def build(self) -> tuple[Sink, Targets]:
        return RedisSink(self.config.load(), topic_prefix=self.topic_prefix), _written


def _written(event: SinkEvent) -> tuple[str, ...]:
    return (WRITTEN,) if event.op in ("c", "u", "r") else ()


def write_cache(spark: SparkSession, source: LogSource, history: TableHistory,
                config: RedisSinkConfig) -> TaskCounts:
    """Write one table's state from the Spark tasks: its truncate, then every key."""
    topic = source.topic(history.name)
    state = text_state(spark, source, history, source.end_offsets(topic), with_deletes=True)
    feed = StateFeed(history, topic, BATCH, CacheRecipe(ShippedConfig.of(config),
                                                        source.topic_prefix))
    truncates = write_from_tasks(state.where(F.col(OP_COLUMN) == "t"), feed)
    truncates.check("Redis", "write(s)", history.name)
    rows = write_from_tasks(spread(state.where(F.col(OP_COLUMN) != "t")), feed)
    rows.check("Redis", "write(s)", history.name)
    return rows


def rebuild_cache_table(spark: SparkSession, source: LogSource, history: TableHistory,
                        config: RedisSinkConfig) -> TableResult:
    """Write one table's state through ``RedisSink``s (see the module docstring)."""
    started = time.perf_counter()
    try:
        counts = write_cache(spark, source, history, config)
    finally:
        spark.catalog.clearCache()
    return TableResult(history.name, counts.total(WRITTEN), "-",
                       f"redis {config.key_template} ({counts.deleted} deletes replayed; "
                       f"{counts.describe()})", time.perf_counter() - started, tasks=counts)
