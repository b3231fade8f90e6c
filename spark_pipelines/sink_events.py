"""The materialized state as the events a sink takes: one per key, its last event again.

A rebuild hands these to the very sink the connector runs (``OpenSearchSink``,
``RedisSink``), inside the Spark task that holds the rows (``task_writes``), so documents,
keys, values, views and the version guard are the streaming path's own — the two cannot
disagree. Each row becomes its last event: the op
(``c``/``u``/``r``; ``d`` and the last ``t`` when deletes are replayed), the key, the row
with the columns of that event's schema version back in their JSON types
(``columns.json_value``), and the version of its source position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import orjson

from cdc.capture.lsn import format_lsn
from cdc.log import Message, Position
from connectors.contract import SinkEvent, version_of

from .columns import json_converter
from .materialize import KEY_COLUMN, OP_COLUMN, POSITION_COLUMNS, VERSION_COLUMN
from .state import TableHistory


def row_event(history: TableHistory, topic: str, row: dict[str, Any]) -> SinkEvent:
    """The sink event of one state row (``text_state``'s columns)."""
    return RowEvents(history, topic).event(row)


class RowEvents:
    """Sink events of one table's state rows, each schema version's column conversions
    (``columns.json_converter``) chosen once."""

    def __init__(self, history: TableHistory, topic: str) -> None:
        self._history = history
        self._topic = topic
        self._source = {"schema": history.newest.schema, "table": history.newest.table}
        self._converters: dict[int, list[tuple[str, Callable[[str | None], Any]]]] = {}

    def _columns(self, version: int) -> list[tuple[str, Callable[[str | None], Any]]]:
        known = self._converters.get(version)
        if known is None:
            known = self._converters[version] = [
                (c.name, json_converter(c)) for c in self._history.columns_at(version)]
        return known

    def event(self, row: dict[str, Any]) -> SinkEvent:
        """The sink event of one state row."""
        lsn, seq = int(row[POSITION_COLUMNS[0]]), int(row[POSITION_COLUMNS[1]])
        op = str(row[OP_COLUMN])
        key_text = str(row[KEY_COLUMN])
        after = None
        if op in ("c", "u", "r"):
            get = row.get
            after = {name: convert(get(name))
                     for name, convert in self._columns(int(row[VERSION_COLUMN] or 0))}
        event = {"op": op, "key": orjson.loads(key_text) if op != "t" else {}, "before": None,
                 "after": after, "unchanged": [],
                 "source": {**self._source, "commit_lsn": format_lsn(lsn), "seq": seq,
                            "snapshot": False},
                 "schema_version": row[VERSION_COLUMN]}
        message = Message(self._topic, 0, 0, 0, key_text.encode(), b"", Position(lsn, seq),
                          op == "d")
        return SinkEvent(message, event, version_of(lsn, seq))


class StateRow(Protocol):
    """A row of ``text_state`` as a task sees it (``pyspark.sql.Row``)."""

    def asDict(self) -> dict[str, Any]: ...


def event_batches(history: TableHistory, topic: str, rows: Iterable[StateRow],
                  batch_size: int) -> Iterator[list[SinkEvent]]:
    """``rows`` as batches of at most ``batch_size`` sink events, in their order."""
    events = RowEvents(history, topic)
    batch: list[SinkEvent] = []
    for row in rows:
        batch.append(events.event(row.asDict()))
        if len(batch) >= batch_size:
            yield batch
            batch = []
    if batch:
        yield batch
