"""Joined views of the OpenSearch and Redis sinks: records built from several tables.

``joined_sink`` puts a ``JoinedSink`` (with its ``JoinStage`` and on-disk ``JoinStore``)
in front of a sink whose config has ``joins``; the inner sink writes the records
through a pass-through view of each joined view's root table.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cdc.config.topic_names import table_topic
from connectors.contract import Sink, SinkContext
from derived import JoinedView, ViewDefinition

from .sink import JoinedSink
from .stage import JoinStage, store_indexes
from .store import JoinStore

__all__ = ["JoinStage", "JoinStore", "JoinedSink", "inner_config", "joined_sink", "store_path"]


def store_path(config: Any, connector: str) -> Path:
    """Where ``connector``'s joined views keep their state."""
    return Path(config.join_state_dir) / f"{connector}.sqlite"


def inner_config(config: Any) -> Any:
    """``config`` for the sink behind the joined views: a pass-through view of each joined
    view's root table to its target (the joins are kept: the OpenSearch sink maps their
    records' fields by the joined tables' column types)."""
    joins: tuple[JoinedView, ...] = config.joins
    views = tuple(config.views) + tuple(
        ViewDefinition(source=join.source, target=join.target, key_template=join.key_template)
        for join in joins)
    return config.model_copy(update={"views": views})


def joined_sink(factory: Callable[[Any, SinkContext], Sink], config: Any,
                context: SinkContext, batch_size: int) -> JoinedSink:
    """The sink ``factory`` builds for ``config``, behind its joined views
    (``batch_size``: the connector's)."""
    joins: tuple[JoinedView, ...] = config.joins
    inner = factory(inner_config(config), context)  # before the store: it holds a lock
    store = JoinStore(store_path(config, context.connector), store_indexes(joins))
    try:
        stage = JoinStage(joins, store)
    except BaseException:
        store.close()
        raise
    plain = {view.table for view in config.views}
    return JoinedSink(inner, stage,
                      lambda schema, table: table_topic(context.topic_prefix, schema, table),
                      plain, batch_size)
