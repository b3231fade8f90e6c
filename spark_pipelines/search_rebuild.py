"""``rebuild-search``: a new index from the materialized state, then an atomic alias swap.

For each table, every alias its OpenSearch connector writes (a view's target, else the
``alias``/``index`` template) is rebuilt:

1. note the log's end offsets, materialize the table below them (``state``);
2. feed the state to the connector's own ``OpenSearchSink`` (same views, ids, mappings,
   external versions) writing through a temporary alias ``<alias>_rebuild_<stamp>``, so
   the new index is ``<alias>_rebuild_<stamp>-1``;
3. refresh and check its document count against the rows the views keep;
4. one ``_aliases`` call: the temporary alias removed, the real alias moved from the old
   index to the new one (as write index);
5. catch up: the events appended since step 1 are replayed through the real alias. The
   streaming connector kept writing to the old index until the swap, and writes to the
   new one after it; every write carries its external version, so whatever arrives
   twice or late is a no-op and no concurrent write is lost.

The old index is kept (``--drop-old`` deletes it after the swap).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc.log import Log, StartAt
from connectors.opensearch.client import make_client
from connectors.opensearch.columns import SchemaTopicColumns
from connectors.opensearch.config import OpenSearchSinkConfig
from connectors.opensearch.names import index_name
from connectors.opensearch.sink import OpenSearchSink
from connectors.placeholders import NameTemplate, TableNames
from connectors.runtime.events import decode_batch
from derived import ViewDefinition, apply_view

from .materialize import OP_COLUMN
from .materialize_job import TableResult
from .sink_events import state_events
from .source import EndOffsets, LogSource
from .state import ReplayError, TableHistory, text_state

CATCH_UP_TIMEOUT_S = 120.0


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
        expected = _load(state, history, topic, log, source,
                         rebuild_config(config, plans), plans)
        new_indices = {plan.alias: _check_count(client, plan, expected[plan.alias])
                       for plan in plans}
        old_indices = _swap(client, plans, new_indices)
        _catch_up(log, source, topic, ends, config, stamp)
        if drop_old:
            for old in {index for indices in old_indices.values() for index in indices}:
                client.indices.delete(index=old, ignore_unavailable=True)
    finally:
        client.close()
        log.close()
        spark.catalog.clearCache()
    seconds = time.perf_counter() - started
    return [TableResult(f"{history.name} -> {plan.alias}", expected[plan.alias], "-",
                        _path(new_indices[plan.alias], old_indices.get(plan.alias, []),
                              drop_old), seconds) for plan in plans]


def _path(new: str, old: list[str], dropped: bool) -> str:
    was = ", ".join(old) or "none"
    return f"{new} (was {was}{', dropped' if dropped and old else ''})"


def _sink(config: OpenSearchSinkConfig, log: Log, source: LogSource, group: str
          ) -> OpenSearchSink:
    sink = OpenSearchSink(config, topic_prefix=source.topic_prefix,
                          column_types=SchemaTopicColumns(log, source.schema_topic, group))
    sink.open()
    return sink


def _load(state: Any, history: TableHistory, topic: str, log: Log, source: LogSource,
          config: OpenSearchSinkConfig, plans: Sequence[AliasPlan]) -> dict[str, int]:
    """Feed the state to a sink writing the temporary aliases; documents per alias."""
    expected = {plan.alias: 0 for plan in plans}
    sink = _sink(config, log, source, f"replay-search-schemas-{plans[0].temporary}")
    try:
        for batch in state_events(state, history, topic, config.bulk_size):
            result = sink.write(batch)
            if result.rejected:
                first = result.rejected[0]
                raise ReplayError(f"OpenSearch refused {len(result.rejected)} document(s) of "
                                  f"{history.name}, for example key {first.event.key}: "
                                  f"{first.reason}")
            for event in batch:
                for plan in plans:
                    if apply_view(plan.view, event.event["after"]) is not None:
                        expected[plan.alias] += 1
    finally:
        sink.close()
    return expected


def _check_count(client: OpenSearch, plan: AliasPlan, expected: int) -> str:
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


def _swap(client: OpenSearch, plans: Sequence[AliasPlan],
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


def _catch_up(log: Log, source: LogSource, topic: str, ends: EndOffsets,
              config: OpenSearchSinkConfig, stamp: str) -> int:
    """Replay the events appended since the state was taken through the real aliases."""
    now = source.end_offsets(topic)
    pending = {p: end for p, end in now.items() if end > ends.get(p, 0)}
    if not pending:
        return 0
    sink = _sink(config, log, source, f"replay-search-catch-up-schemas-{stamp}")
    consumer = log.consumer(f"replay-search-{stamp}", topics=[topic], start=StartAt.earliest())
    replayed = 0
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    try:
        while pending:
            if time.monotonic() > deadline:
                raise ReplayError(f"catching up {topic} did not reach offsets {pending} within "
                                  f"{CATCH_UP_TIMEOUT_S:.0f}s; the alias was moved already, "
                                  "the streaming connector will fill the gap")
            messages = consumer.poll(config.bulk_size, timeout=0.5)
            newer = [m for m in messages if m.offset >= ends.get(m.partition, 0)
                     and m.offset < now.get(m.partition, 0)]
            for message in messages:
                if message.offset + 1 >= pending.get(message.partition, -1) >= 0:
                    pending.pop(message.partition, None)
            if newer:
                sink.write(decode_batch(newer).events)
                replayed += len(newer)
    finally:
        consumer.close()
        sink.close()
    return replayed
