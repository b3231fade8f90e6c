"""The materialized state as the events a sink takes: one per key, its last event again.

A rebuild hands these to the very sink the connector runs (``OpenSearchSink``,
``RedisSink``), so documents, keys, values, views and the version guard are the
streaming path's own — the two cannot disagree. Each row becomes its last event: the op
(``c``/``u``/``r``; ``d`` and the last ``t`` when deletes are replayed), the key, the row
with the columns of that event's schema version back in their JSON types
(``columns.json_value``), and the version of its source position.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from pyspark.sql import DataFrame

from cdc.capture.lsn import format_lsn
from cdc.log import Message, Position
from connectors.contract import SinkEvent, version_of

from .columns import json_value
from .materialize import KEY_COLUMN, OP_COLUMN, POSITION_COLUMNS, VERSION_COLUMN
from .state import TableHistory


def row_event(history: TableHistory, topic: str, row: dict[str, Any]) -> SinkEvent:
    """The sink event of one state row (``text_state``'s columns)."""
    lsn, seq = int(row[POSITION_COLUMNS[0]]), int(row[POSITION_COLUMNS[1]])
    op = str(row[OP_COLUMN])
    key_text = str(row[KEY_COLUMN])
    after = None
    if op in ("c", "u", "r"):
        columns = history.columns_at(int(row[VERSION_COLUMN] or 0))
        after = {c.name: json_value(c, row.get(c.name)) for c in columns}
    event = {"op": op, "key": orjson.loads(key_text) if op != "t" else {}, "before": None,
             "after": after, "unchanged": [],
             "source": {"schema": history.newest.schema, "table": history.newest.table,
                        "commit_lsn": format_lsn(lsn), "seq": seq, "snapshot": False},
             "schema_version": row[VERSION_COLUMN]}
    message = Message(topic, 0, 0, 0, key_text.encode(), b"", Position(lsn, seq), op == "d")
    return SinkEvent(message, event, version_of(lsn, seq))


def state_events(state: DataFrame, history: TableHistory, topic: str,
                 batch_size: int) -> Iterator[list[SinkEvent]]:
    """Batches of the state's events, streamed to the driver partition by partition."""
    batch: list[SinkEvent] = []
    rows: Iterable[Any] = state.toLocalIterator(prefetchPartitions=True)
    for row in rows:
        batch.append(row_event(history, topic, row.asDict()))
        if len(batch) >= batch_size:
            yield batch
            batch = []
    if batch:
        yield batch
