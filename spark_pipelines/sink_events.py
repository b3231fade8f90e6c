"""The materialized state as the events a sink takes: one per key, its last event again.

A rebuild hands these to the very sink the connector runs (``OpenSearchSink``,
``RedisSink``), inside the Spark task that holds the rows (``task_writes``), so documents,
keys, values, views and the version guard are the streaming path's own — the two cannot
disagree. Each row becomes its last event: the op
(``c``/``u``/``r``; ``d`` and the last ``t`` when deletes are replayed), the key, the row
with the columns of that event's schema version back in their JSON types
(``columns.json_value``), and the version of its source position. Its message carries
what a message read from the log carries: the key's JSON text and the event's JSON (the
value a sink may read raw: the Redis sink's native renderer, a webhook, a dead letter).

A task receives its rows as JSON text (``DataFrame.toJSON``: no pickled rows and no
``Row`` objects between Spark and the Python worker; a null column is left out, which
reads back as ``None`` like a null).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import orjson

from cdc.capture.lsn import format_lsn
from cdc.log import Message, Position
from connectors.contract import SinkEvent, version_of

from .columns import json_converter, passes_text
from .materialize import KEY_COLUMN, OP_COLUMN, POSITION_COLUMNS, UPSERTS, VERSION_COLUMN
from .state import TableHistory

Converter = Callable[[str | None], Any]
StateRow = str | bytes  # one row of ``text_state`` as ``DataFrame.toJSON`` gives it

_LSN, _SEQ = POSITION_COLUMNS


def row_event(history: TableHistory, topic: str, row: Mapping[str, Any]) -> SinkEvent:
    """The sink event of one state row (``text_state``'s columns)."""
    return RowEvents(history, topic).event(row)


class RowEvents:
    """Sink events of one table's state rows, each schema version's column conversions
    (``columns.json_converter``) chosen once."""

    def __init__(self, history: TableHistory, topic: str) -> None:
        self._history = history
        self._topic = topic
        self._schema, self._table = history.newest.schema, history.newest.table
        # version → (its column names, the columns whose text is not their JSON value)
        self._versions: dict[int, tuple[tuple[str, ...], tuple[tuple[str, Converter], ...]]] = {}

    def _columns(self, version: int) -> tuple[tuple[str, ...], tuple[tuple[str, Converter], ...]]:
        known = self._versions.get(version)
        if known is None:
            columns = self._history.columns_at(version)
            known = self._versions[version] = (
                tuple(c.name for c in columns),
                tuple((c.name, json_converter(c)) for c in columns if not passes_text(c)))
        return known

    def after(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The ``after`` of an upsert's state row: its columns in their JSON types."""
        get = row.get
        names, converted = self._columns(int(get(VERSION_COLUMN) or 0))
        after = {name: get(name) for name in names}  # text: the JSON value as it is
        for name, convert in converted:
            after[name] = convert(after[name])
        return after

    def event(self, row: Mapping[str, Any]) -> SinkEvent:
        """The sink event of one state row."""
        lsn, seq = int(row[_LSN]), int(row[_SEQ])
        op = str(row[OP_COLUMN])
        key_text = str(row[KEY_COLUMN])
        schema_version = row.get(VERSION_COLUMN)
        after = self.after(row) if op in UPSERTS else None
        event = {"op": op, "key": orjson.loads(key_text) if op != "t" else {}, "before": None,
                 "after": after, "unchanged": [],
                 "source": {"schema": self._schema, "table": self._table,
                            "commit_lsn": format_lsn(lsn), "seq": seq, "snapshot": False},
                 "schema_version": schema_version}
        message = Message(self._topic, 0, 0, 0, key_text.encode(), orjson.dumps(event),
                          Position(lsn, seq), op == "d")
        return SinkEvent(message, event, version_of(lsn, seq))


def event_batches(history: TableHistory, topic: str, rows: Iterable[StateRow],
                  batch_size: int) -> Iterator[list[SinkEvent]]:
    """``rows`` (JSON text) as batches of at most ``batch_size`` sink events, in order."""
    event = RowEvents(history, topic).event
    loads = orjson.loads
    batch: list[SinkEvent] = []
    for row in rows:
        batch.append(event(loads(row)))
        if len(batch) >= batch_size:
            yield batch
            batch = []
    if batch:
        yield batch
