"""``rebuild-search`` and ``rebuild-cache`` for joined views: the records built from the
materialized tables, written by the connector's own sink from the Spark tasks.

The records come from ``join_gather`` (the rows of every table the view reads, grouped
by root) and ``join_records`` (``derived.build_record`` per root in the tasks). They are
written through the connector's sink configured as for a plain table: no views, the
record as the row, the root table's names and key (``_id`` = ``derived.encode_key`` of
the root key; the Redis key from the view's ``key_template`` or the sink's), with the
version of the newest contributing event.

Search: the records go to a new index behind a temporary alias; its document count is
checked against the records written, then one ``_aliases`` call moves the alias (as
``search_rebuild`` does). Catch-up: if any of the view's topics grew since the end
offsets noted first, the records are built again below the new end offsets and written
through the real alias, deletes included — every write versioned, so what the streaming
connector wrote from a newer event stays.

Cache: the root's last truncate first (the sink's own truncate of the root table's keys),
then every root's record, or a delete for a root deleted or without a record, each
through the sink's version guard.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from opensearchpy import OpenSearch
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from connectors.opensearch.client import make_client
from connectors.opensearch.columns import SchemaTopicColumns
from connectors.opensearch.config import OpenSearchSinkConfig
from connectors.opensearch.mapping import joined_mappings
from connectors.redis.config import RedisSinkConfig
from derived import JoinedView

from .cache_rebuild import BATCH, WRITTEN, CacheRecipe
from .join_gather import JoinedTables, gather, note_ends
from .join_records import JoinedFeed
from .materialize import OP_COLUMN
from .materialize_job import TableResult
from .search_rebuild import AliasPlan, check_count, rebuild_path, swap_aliases
from .search_tasks import KnownColumnTypes, SearchRecipe, create_indices
from .source import EndOffsets, LogSource
from .state import TableHistory
from .task_writes import ShippedConfig, SinkRecipe, StateFeed, TaskCounts, write_from_tasks


def write_joined(spark: SparkSession, source: LogSource, tables: JoinedTables,
                 ends: Mapping[str, EndOffsets], recipe: SinkRecipe, batch_size: int, *,
                 deletes: bool) -> TaskCounts:
    """Build the view's records below ``ends`` and write them from the tasks (with
    ``deletes``: the root's truncate first, and deletes of roots without a record)."""
    gathered = gather(spark, source, tables, ends, with_deletes=deletes)
    if gathered is None or tables.root is None:
        return TaskCounts(())
    if deletes:
        _, history, topic = tables.root
        truncates = write_from_tasks(gathered.root_state.where(F.col(OP_COLUMN) == "t"),
                                     StateFeed(history, topic, batch_size, recipe))
        truncates.check("the sink", "truncate(s)", tables.view.source)
    feed = JoinedFeed(ShippedConfig.of(tables.view), tables.tables, batch_size, recipe,
                      deletes)
    return TaskCounts(tuple(gathered.lines.rdd.mapPartitionsWithIndex(
        feed.write_partition).collect()))


def search_config(config: OpenSearchSinkConfig, alias: str) -> OpenSearchSinkConfig:
    """``config`` writing every record as it is to ``alias`` (no views, no joins)."""
    return config.model_copy(update={"views": (), "joins": (), "index": alias, "alias": None})


def _search_recipe(config: OpenSearchSinkConfig, source: LogSource, written: str,
                   counted: str) -> SearchRecipe:
    return SearchRecipe(ShippedConfig.of(search_config(config, written)), source.topic_prefix,
                        KnownColumnTypes(), ((written, counted),))


def rebuild_joined_search(spark: SparkSession, source: LogSource,
                          histories: Mapping[str, TableHistory], view: JoinedView,
                          config: OpenSearchSinkConfig, *, drop_old: bool, stamp: str
                          ) -> TableResult:
    """Rebuild the joined view's alias (see the module docstring)."""
    started = time.perf_counter()
    tables = JoinedTables.of(view, histories, source)
    plan = AliasPlan(view.target, f"{view.target}_rebuild_{stamp}", None)
    ends = note_ends(source, tables)
    client = make_client(config)
    try:
        create_indices(client, search_config(config, plan.temporary), [plan.temporary])
        map_joined_fields(client, source, view, plan.temporary)
        counts = write_joined(spark, source, tables, ends,
                              _search_recipe(config, source, plan.temporary, plan.alias),
                              config.bulk_size, deletes=False)
        counts.check("OpenSearch", "document(s)", f"{view.source} (joined)")
        new = check_count(client, plan, counts.total(plan.alias))
        old = swap_aliases(client, [plan], {plan.alias: new})[plan.alias]
        caught_up = catch_up_joined(spark, source, tables, ends, config, client)
        if drop_old:
            for index in old:
                client.indices.delete(index=index, ignore_unavailable=True)
    finally:
        client.close()
        spark.catalog.clearCache()
    path = rebuild_path(new, old, drop_old, counts)
    if caught_up is not None:
        path += f"; caught up: {caught_up.total(plan.alias)} record(s) written again, " \
            f"{caught_up.deleted} deleted"
    return TableResult(f"{view.source} (joined) -> {view.target}", counts.total(plan.alias),
                       "-", path, time.perf_counter() - started, tasks=counts)


def map_joined_fields(client: OpenSearch, source: LogSource, view: JoinedView,
                      alias: str) -> None:
    """Map the records' fields in the index behind ``alias`` as the streaming connector
    does (``connectors.opensearch.mapping.joined_mappings``, the joined tables' newest
    column types)."""
    log = source.open_log()
    try:
        types = SchemaTopicColumns(log, source.schema_topic, f"replay-search-schemas-{alias}")
        properties = joined_mappings(view, lambda table: types(*table, 0))
    finally:
        log.close()
    client.indices.put_mapping(index=alias, body={"properties": properties})


def catch_up_joined(spark: SparkSession, source: LogSource, tables: JoinedTables,
                    ends: Mapping[str, EndOffsets], config: OpenSearchSinkConfig,
                    client: OpenSearch) -> TaskCounts | None:
    """If a topic of the view grew since ``ends``, every record again (and deletes) below
    the end offsets now, through the real alias; ``None`` when none grew."""
    now = note_ends(source, tables)
    if all(end <= ends.get(topic, {}).get(p, 0)
           for topic, offsets in now.items() for p, end in offsets.items()):
        return None
    alias = tables.view.target
    counts = write_joined(spark, source, tables, now,
                          _search_recipe(config, source, alias, alias), config.bulk_size,
                          deletes=True)
    counts.check("OpenSearch", "document(s)", f"{tables.view.source} (joined, catching up)")
    return counts


def cache_config(config: RedisSinkConfig, view: JoinedView) -> RedisSinkConfig:
    """``config`` writing every record as it is under the view's key template."""
    return config.model_copy(update={"views": (), "joins": (),
                                     "key_template": view.key_template or config.key_template})


def rebuild_joined_cache(spark: SparkSession, source: LogSource,
                         histories: Mapping[str, TableHistory], view: JoinedView,
                         config: RedisSinkConfig) -> TableResult:
    """Write the joined view's records through ``RedisSink``s (see the module docstring)."""
    started = time.perf_counter()
    tables = JoinedTables.of(view, histories, source)
    template = cache_config(config, view).key_template
    recipe = CacheRecipe(ShippedConfig.of(cache_config(config, view)), source.topic_prefix)
    try:
        counts = write_joined(spark, source, tables, note_ends(source, tables), recipe, BATCH,
                              deletes=True)
        counts.check("Redis", "write(s)", f"{view.source} (joined)")
    finally:
        spark.catalog.clearCache()
    return TableResult(f"{view.source} (joined)", counts.total(WRITTEN), "-",
                       f"redis {template} ({counts.deleted} deletes written; "
                       f"{counts.describe()})", time.perf_counter() - started, tasks=counts)
