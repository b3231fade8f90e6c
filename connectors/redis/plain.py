"""The plain batch, rendered straight from the decoded events.

A batch is plain when every event is an insert, update or snapshot row (with no column
left unchanged by TOAST) or a delete, of a table without a view (or whose one view passes
its rows as they are, keyed by the sink's template: a joined view's records), and the sink
writes JSON values (``mode: upsert``). Then each row's key comes from the event's ``key`` object and
its value is the event's ``after`` object dumped as it is: no ``Change`` objects, no copy
of a row. Anything else — a truncate, a view, an unchanged column, a malformed event, a
value over ``max_value_bytes`` — makes ``rows`` answer ``None``, and the sink takes the
general path (``connectors.changes`` and ``rows``), which decides what such an event
means; for a plain batch both paths give the same rows.

Where the native core is installed, ``native_rows`` renders the plain batch from the
events' raw JSON instead; the loop here stays the reference (and takes what the native
renderer leaves to Python).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import orjson

from connectors.changes import UPSERT_OPS, passing_views
from connectors.contract import SinkEvent
from connectors.placeholders import TableNames

from .batch import CHUNK_BYTES, CHUNK_ROWS, PackedBatch, RowBatch, ScriptBatch
from .cluster_batch import ClusterRows
from .config import RedisSinkConfig
from .keys import KeyTemplates, TableKeys
from .native_rows import NativeRows


class PlainRows:
    """Renders plain batches (see the module docstring)."""

    def __init__(self, config: RedisSinkConfig, keys: KeyTemplates, topic_prefix: str, *,
                 native: bool = True, chunk_rows: int = CHUNK_ROWS,
                 chunk_bytes: int = CHUNK_BYTES) -> None:
        """``native``: use the native renderer where it is installed (False: only the
        Python loop, the reference; always on a cluster, whose rows go by master).
        ``chunk_rows``, ``chunk_bytes``: where calls are cut (``ScriptBatch``)."""
        native = native and not config.cluster
        self._batch: Callable[[tuple[int, int, int]], RowBatch] = partial(
            ClusterRows if config.cluster else ScriptBatch, chunk_rows=chunk_rows,
            chunk_bytes=chunk_bytes)
        self._enabled = config.value_format == "json" and config.mode == "upsert"
        # a view passing rows as they are, keyed by the sink's template, changes nothing
        passing = {table for table, view in passing_views(config.views).items()
                   if view.key_template is None}
        self._viewed = {view.table for view in config.views} - passing
        self._keys = keys
        self._prefix = topic_prefix
        self._max_bytes = config.max_value_bytes
        self._tables: dict[tuple[str, str, str], TableKeys | None] = {}
        self._native = NativeRows(
            keys, self._viewed, topic_prefix, self._max_bytes, chunk_rows=chunk_rows,
            chunk_bytes=chunk_bytes) if native else None

    def rows(self, events: Sequence[SinkEvent], ttls: tuple[int, int, int]
             ) -> RowBatch | PackedBatch | None:
        """The rows of ``events`` if the batch is plain, else ``None``."""
        if not self._enabled:
            return None
        if self._native is not None:
            rendered = self._native.rows(events, ttls)
            if rendered is not None:
                return rendered
        batch = self._batch(ttls)
        add = batch.row
        for item in events:
            event = item.event
            key = event.get("key")
            table = self._table(item)
            if not key or type(key) is not dict or table is None:
                return None
            op = event.get("op")
            if op == "d":
                add(item, table.render(key), table.marker, "d")
                continue
            after = event.get("after")
            if op not in UPSERT_OPS or type(after) is not dict or event.get("unchanged"):
                return None
            value = orjson.dumps(after)
            if len(value) > self._max_bytes:
                return None
            add(item, table.render(key), table.marker, "j", (value,), len(value))
        return batch

    def _table(self, item: SinkEvent) -> TableKeys | None:
        """The keys of the event's table; ``None`` if a view reads the table."""
        source = item.event.get("source")
        if type(source) is not dict:
            return None
        topic = item.message.topic
        names_key = (topic, str(source.get("schema")), str(source.get("table")))
        try:
            return self._tables[names_key]
        except KeyError:
            names = TableNames.of(topic, source, self._prefix)
            found = None if (names.schema, names.table) in self._viewed \
                else self._keys.table(names, None)
            self._tables[names_key] = found
            return found
