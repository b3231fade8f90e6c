"""A joined view's records, built in the Spark task holding a group of roots, as the sink
events that write them.

A task receives its lines (``join_gather``): the roots of its groups and every row their
records can read. It turns each row back into its event's ``after`` and ``key``
(``sink_events.RowEvents``, the rebuild's one conversion), holds them in a
``RowsInMemory`` and builds each root's record with ``derived.build_record``: the same
function the streaming connector uses, so the records are the same by construction.

Each record becomes an upsert event of the root's key (the root table's schema, table
and topic: keys and ids render as a plain view of the root table renders them) with
``after`` the record. Its version is that of the newest position among the root and
every row the build read (``Positions``): at least the position of the newest event any
contributing row came from, and at most the position of the newest event below the end
offsets the rebuild read to; a streaming connector writing the same record later, from a
later event, writes a version at least as high. With ``deletes``, a root whose last
event is a delete, and a live root with no record (its filter, or a required lookup
found nothing), give a delete at that version instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from pyspark.sql import Row as SparkRow

from cdc.capture.lsn import format_lsn
from cdc.log import Position
from connectors.contract import SinkEvent, version_of
from derived import JoinedView, RowsInMemory, build_record
from derived.join_build import Keyed, Row

from .join_gather import ROOT, TABLE_FIELD
from .materialize import KEY_COLUMN, OP_COLUMN, POSITION_COLUMNS, UPSERTS
from .sink_events import RowEvents
from .state import TableHistory
from .task_writes import ShippedConfig, SinkRecipe, TaskCount, write_batches

Source = tuple[int, int]  # (commit lsn, seq)
_LSN, _SEQ = POSITION_COLUMNS


class Positions:
    """A ``JoinRows`` over ``RowsInMemory`` that remembers the newest source position of
    the rows it handed out since ``start``."""

    def __init__(self, rows: RowsInMemory, positions: dict[int, Source]) -> None:
        self._rows = rows
        self._positions = positions  # id(row) → its position
        self.newest: Source = (0, 0)

    def start(self, position: Source) -> None:
        """Begin a record at its root's position."""
        self.newest = position

    def matching(self, table: tuple[str, str], columns: tuple[str, ...],
                 values: tuple[Any, ...]) -> Sequence[Keyed]:
        found = self._rows.matching(table, columns, values)
        for _, row in found:
            position = self._positions[id(row)]
            if position > self.newest:
                self.newest = position
        return found


@dataclass(frozen=True, slots=True)
class JoinedFeed:
    """A task's lines into records, into the sink a recipe builds (see the module
    docstring)."""

    view: ShippedConfig[JoinedView]
    tables: tuple[tuple[str, TableHistory, str], ...]  # as ``JoinedTables.tables``
    batch_size: int
    recipe: SinkRecipe
    deletes: bool

    def write_partition(self, partition: int, rows: Iterable[SparkRow]) -> Iterator[TaskCount]:
        """The task's work: build, then write in batches."""
        events = joined_events(self.view.load(), self.tables, (row[0] for row in rows),
                               deletes=self.deletes)
        yield from write_batches(partition, _batches(events, self.batch_size), self.recipe)


def joined_events(view: JoinedView, tables: Sequence[tuple[str, TableHistory, str]],
                  lines: Iterable[str], *, deletes: bool) -> Iterator[SinkEvent]:
    """The events writing the records of the roots among ``lines`` (see the module
    docstring)."""
    converters = [RowEvents(history, topic) for _, history, topic in tables]
    names = [(history.newest.schema, history.newest.table) for _, history, _ in tables]
    rows: dict[tuple[str, str], dict[str, Keyed]] = {}  # table → key text → (key, row)
    positions: dict[int, Source] = {}
    roots: list[SinkEvent] = []
    for line in lines:
        text = orjson.loads(line)
        number = text.pop(TABLE_FIELD)
        if number == ROOT:
            if text[OP_COLUMN] in UPSERTS or (deletes and text[OP_COLUMN] == "d"):
                roots.append(converters[0].event(text))
            continue
        found = rows.setdefault(names[number], {})
        key_text = text[KEY_COLUMN]
        if key_text not in found:  # a table joined at two levels comes twice
            after = converters[number].after(text)
            found[key_text] = (orjson.loads(key_text), after)
            positions[id(after)] = (int(text[_LSN]), int(text[_SEQ]))
    joined = Positions(RowsInMemory({table: list(keyed.values())
                                     for table, keyed in rows.items()}), positions)
    for root in roots:
        event = root.event
        if event["op"] == "d":
            yield root
            continue
        joined.start(root.message.position)
        record = build_record(view, event["after"], joined)
        if record is not None or deletes:
            yield _record_event(root, record, joined.newest)


def _record_event(root: SinkEvent, record: Row | None, position: Source) -> SinkEvent:
    """The event writing ``record`` (``None``: deleting) under ``root``'s key."""
    lsn, seq = position
    event = dict(root.event)
    event.update(op=event["op"] if record is not None else "d", after=record,
                 source={**event["source"], "commit_lsn": format_lsn(lsn), "seq": seq})
    message = root.message._replace(value=orjson.dumps(event), position=Position(lsn, seq),
                                    tombstone=record is None)
    return SinkEvent(message, event, version_of(lsn, seq))


def _batches(events: Iterable[SinkEvent], size: int) -> Iterator[list[SinkEvent]]:
    batch: list[SinkEvent] = []
    for event in events:
        batch.append(event)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
