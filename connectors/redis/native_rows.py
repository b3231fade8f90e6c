"""The plain batch rendered by the native core (``distributary_native.redis_calls``,
``native/src/python/redis_args.rs``) straight from the events' raw JSON into the script
calls' wire format (``batch.PackedBatch``): keys, versions and values without a Python
object per event.

``NativeRows.rows`` answers ``None`` whenever the native renderer leaves the batch to
Python (not plain, or a case it does not render: a float key column, a duplicate JSON
member...); ``plain.PlainRows`` then runs its Python loop, the reference the native rows
are tested against (``tests/unit/connectors/test_redis_native_rows.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from cdc.native import CORE
from connectors.contract import SinkEvent
from connectors.placeholders import TableNames

from .batch import CHUNK_BYTES, CHUNK_ROWS, PackedBatch, PackedCall
from .keys import KeyParts, KeyTemplates
from .truncate import VERSION_PREFIX

TableId: TypeAlias = tuple[str, str, str]  # (topic, schema, table)


class NativeRows:
    """Plain batches through the native renderer, with the tables' key parts it needs."""

    def __init__(self, keys: KeyTemplates, viewed: set[tuple[str, str]], topic_prefix: str,
                 max_value_bytes: int, *, chunk_rows: int = CHUNK_ROWS,
                 chunk_bytes: int = CHUNK_BYTES) -> None:
        """``chunk_rows``, ``chunk_bytes``: where calls are cut, as ``ScriptBatch``'s."""
        self._keys = keys
        self._viewed = viewed
        self._prefix = topic_prefix
        self._max_bytes = max_value_bytes
        self._chunk_rows = chunk_rows
        self._chunk_bytes = chunk_bytes
        self._tables: dict[TableId, KeyParts | None] = {}

    def rows(self, events: Sequence[SinkEvent], ttls: tuple[int, int, int]
             ) -> PackedBatch | None:
        """The rows of ``events``, or ``None``: Python decides."""
        batch = events if isinstance(events, list) else list(events)
        for _ in range(len(batch) + 1):  # each round adds a table: ends by then
            rendered, missing = CORE.redis_calls(
                batch, self._tables, VERSION_PREFIX, self._max_bytes, self._chunk_rows,
                self._chunk_bytes)
            if missing is None:
                if rendered is None:
                    return None
                markers, calls = rendered
                return PackedBatch(ttls, batch, markers, [PackedCall(*call) for call in calls])
            self._tables[missing] = self._parts(*missing)
        return None

    def _parts(self, topic: str, schema: str, table: str) -> KeyParts | None:
        """The key parts of a table (``None``: a view reads it)."""
        names = TableNames.of(topic, {"schema": schema, "table": table}, self._prefix)
        if (names.schema, names.table) in self._viewed:
            return None
        return self._keys.parts(names)
