"""``rebuild-search``: a new index from the materialized state, then an atomic alias swap.

For each table, every alias its OpenSearch connector writes (a view's target, else the
``alias``/``index`` template) is rebuilt:

1. note the log's end offsets, materialize the table below them (``state``);
2. create the new index ``<alias>_rebuild_<stamp>-1`` behind a temporary alias
   ``<alias>_rebuild_<stamp>``; then every Spark task feeds its partition of the state to
   an ``OpenSearchSink`` of its own — the connector's sink, with the same views, ids,
   mappings and external versions — writing through the temporary alias
   (``task_writes``, ``search_tasks``); the driver collects only the tasks' counts;
3. refresh and check the new index's document count against the rows the views kept;
4. one ``_aliases`` call: the temporary alias removed, the real alias moved from the old
   index to the new one (as write index);
5. catch up: the events appended since step 1 — read from the end offsets it noted, by
   assignment (``log_range``) — are replayed through the real alias. The
   streaming connector kept writing to the old index until the swap, and writes to the
   new one after it; every write carries its external version, so whatever arrives
   twice or late is a no-op and no concurrent write is lost.

The old index is kept (``--drop-old`` deletes it after the swap).

Joined views (``joins``) are rebuilt alike by ``join_rebuild``; their root tables have
no alias of their own here.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.log import Log, Message
from connectors.opensearch.client import make_client
from connectors.opensearch.columns import SchemaTopicColumns
from connectors.opensearch.config import OpenSearchSinkConfig
from connectors.opensearch.names import index_name
from connectors.opensearch.sink import OpenSearchSink
from connectors.placeholders import NameTemplate, TableNames
from connectors.runtime.events import decode_batch
from derived import ViewDefinition

from .log_range import read_range
from .materialize import OP_COLUMN
from .materialize_job import TableResult
from .search_tasks import SearchRecipe, create_indices, known_column_types
from .source import EndOffsets, LogSource
from .state import ReplayError, TableHistory, text_state
from .task_writes import ShippedConfig, StateFeed, TaskCounts, spread, write_from_tasks


@dataclass(frozen=True, slots=True)
class AliasPlan:
    """One alias of a table: its view (if any) and the temporary alias of the rebuild."""

    alias: str
    temporary: str
    view: ViewDefinition | None


def alias_plans(config: OpenSearchSinkConfig, names: TableNames, stamp: str) -> list[AliasPlan]:
    """The aliases ``names``'s table feeds, each with its temporary alias."""
    views = [v for v in config.views if v.table == (names.schema, names.table)]
    if views:
        return [AliasPlan(v.target, f"{v.target}_rebuild_{stamp}", v) for v in views]
    template = config.alias if config.alias is not None else config.index
    alias = index_name(NameTemplate(template).render(names))
    return [AliasPlan(alias, f"{alias}_rebuild_{stamp}", None)]


def rebuild_config(config: OpenSearchSinkConfig, plans: Sequence[AliasPlan]
                   ) -> OpenSearchSinkConfig:
    """``config`` writing to the temporary aliases instead of the real ones."""
    views = tuple(v.model_copy(update={"target": p.temporary}) if (p := _plan_of(plans, v))
                  else v for v in config.views)
    plain = next((p for p in plans if p.view is None), None)
    update: dict[str, Any] = {"views": views}
    if plain is not None:
        update.update(index=plain.temporary, alias=None)
    return config.model_copy(update=update)


def _plan_of(plans: Sequence[AliasPlan], view: ViewDefinition) -> AliasPlan | None:
    return next((p for p in plans if p.view is view), None)


def rebuild_table(spark: SparkSession, source: LogSource, history: TableHistory,
                  config: OpenSearchSinkConfig, *, drop_old: bool, stamp: str
                  ) -> list[TableResult]:
    """Rebuild every alias of one table (see the module docstring)."""
    started = time.perf_counter()
    topic = source.topic(history.name)
    names = TableNames(source.topic_prefix, topic, history.newest.schema, history.newest.table)
    plans = alias_plans(config, names, stamp)
    ends = source.end_offsets(topic)
    state = text_state(spark, source, history, ends).where(F.col(OP_COLUMN) != "t")
    log = source.open_log()
    client = make_client(config)
    try:
        counts = load(spread(state), history, topic, log, source, rebuild_config(config, plans),
                      plans, client)
        new_indices = {plan.alias: check_count(client, plan, counts.total(plan.alias))
                       for plan in plans}
        old_indices = swap_aliases(client, plans, new_indices)
        catch_up(log, source, topic, ends, config, stamp)
        if drop_old:
            for old in {index for indices in old_indices.values() for index in indices}:
                client.indices.delete(index=old, ignore_unavailable=True)
    finally:
        client.close()
        log.close()
        spark.catalog.clearCache()
    seconds = time.perf_counter() - started
    return [TableResult(f"{history.name} -> {plan.alias}", counts.total(plan.alias), "-",
                        rebuild_path(new_indices[plan.alias], old_indices.get(plan.alias, []),
                              drop_old, counts), seconds, tasks=counts) for plan in plans]


def rebuild_path(new: str, old: list[str], dropped: bool, counts: TaskCounts) -> str:
    """What the summary shows of a rebuilt alias: its new index, the old ones, the tasks."""
    was = ", ".join(old) or "none"
    return f"{new} (was {was}{', dropped' if dropped and old else ''}; {counts.describe()})"


def _sink(config: OpenSearchSinkConfig, log: Log, source: LogSource, group: str
          ) -> OpenSearchSink:
    sink = OpenSearchSink(config, topic_prefix=source.topic_prefix,
                          column_types=SchemaTopicColumns(log, source.schema_topic, group))
    sink.open()
    return sink


def load(state: DataFrame, history: TableHistory, topic: str, log: Log, source: LogSource,
         config: OpenSearchSinkConfig, plans: Sequence[AliasPlan],
         client: OpenSearch) -> TaskCounts:
    """Write ``state`` from its Spark tasks (one per partition) through ``config`` (the
    temporary aliases); their counts, documents per real alias. A refused document fails
    the rebuild."""
    create_indices(client, config, [plan.temporary for plan in plans])
    types = known_column_types(log, source.schema_topic,
                               f"replay-search-schemas-{plans[0].temporary}", history)
    recipe = SearchRecipe(ShippedConfig.of(config), source.topic_prefix, types,
                          tuple((plan.temporary, plan.alias) for plan in plans))
    counts = write_from_tasks(state, StateFeed(history, topic, config.bulk_size, recipe))
    counts.check("OpenSearch", "document(s)", history.name)
    return counts


def check_count(client: OpenSearch, plan: AliasPlan, expected: int) -> str:
    """Refresh the new index and compare its count; its concrete name."""
    found = client.indices.get_alias(name=plan.temporary)
    index = next(iter(found)) if found else plan.temporary
    client.indices.refresh(index=index)
    count = int(client.count(index=index)["count"])
    if count != expected:
        raise ReplayError(f"the new index {index} holds {count} documents, expected "
                          f"{expected}; the alias {plan.alias} was not moved (the new index "
                          "is left for inspection)")
    return index


def swap_aliases(client: OpenSearch, plans: Sequence[AliasPlan],
                 new_indices: dict[str, str]) -> dict[str, list[str]]:
    """Move every alias to its new index in one atomic ``_aliases`` call."""
    actions: list[dict[str, Any]] = []
    old: dict[str, list[str]] = {}
    for plan in plans:
        try:
            old[plan.alias] = sorted(client.indices.get_alias(name=plan.alias))
        except NotFoundError:
            old[plan.alias] = []
        new = new_indices[plan.alias]
        actions.append({"remove": {"index": new, "alias": plan.temporary}})
        actions.extend({"remove": {"index": index, "alias": plan.alias}}
                       for index in old[plan.alias])
        actions.append({"add": {"index": new, "alias": plan.alias, "is_write_index": True}})
    client.indices.update_aliases(body={"actions": actions})
    return old


def catch_up(log: Log, source: LogSource, topic: str, ends: EndOffsets,
             config: OpenSearchSinkConfig, stamp: str) -> int:
    """Replay the events appended since the state was taken (from ``ends`` on, up to the
    end offsets now) through the real aliases; how many."""
    now = source.end_offsets(topic)
    if all(end <= ends.get(p, 0) for p, end in now.items()):
        return 0
    sink = _sink(config, log, source, f"replay-search-catch-up-schemas-{stamp}")
    replayed = 0
    try:
        batch: list[Message] = []
        for message in read_range(source, topic, ends, now):
            batch.append(message)
            if len(batch) >= config.bulk_size:
                replayed += _replay(sink, batch, topic)
                batch = []
        if batch:
            replayed += _replay(sink, batch, topic)
    finally:
        sink.close()
    return replayed


def _replay(sink: OpenSearchSink, messages: list[Message], topic: str) -> int:
    result = sink.write(decode_batch(messages).events)
    if result.rejected:
        first = result.rejected[0]
        raise ReplayError(f"catching up {topic}: OpenSearch refused {len(result.rejected)} "
                          f"document(s), for example key {first.event.key}: {first.reason} "
                          "(the alias was moved already)")
    return len(messages)
