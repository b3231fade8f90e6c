"""``JoinedSink``: a sink's joined views, in front of the sink that writes their records.

The events of the tables a joined view reads go to the state store (``JoinStage``),
every one of them (the runtime does not coalesce a joined sink's batches: a key
change's delete completes its insert);
the records they touch are written by the inner sink (OpenSearch, Redis) as events of
the root table, one per root key, through a pass-through view to the joined view's
target. Other events go to the inner sink as they are.

The store is ahead of the target, never behind, so a record never goes back:

1. ``write`` applies the batch's new events (offset at or past the store's) and marks
   the records they touch pending, then builds every pending record and hands out its
   version (above every earlier one, across restarts, and at least the event's own
   ``version_of``), all in one durable store transaction; then the inner sink writes them.
2. ``flush`` flushes the inner sink, then clears what is pending.

After a crash the store holds exactly the events before its offsets: earlier ones read
again are skipped, and pending records are written again when the sink opens. A new
store (a new host, a deleted file) reads the topics from their first offset
(``admit``), whatever the group committed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from cdc.errors import TerminalError
from cdc.log import Consumer, Message, Position, TopicPartition
from connectors.contract import Rejection, Sink, SinkEvent, WriteResult

from .stage import JoinStage
from .store import JoinStore, Table

log = logging.getLogger(__name__)

StartOffset = Callable[[TopicPartition], int]


class JoinedSink:
    """Joined views in front of ``inner`` (see the module docstring)."""

    def __init__(self, inner: Sink, stage: JoinStage, topic_of: Callable[[str, str], str],
                 plain_tables: set[Table]) -> None:
        """``topic_of(schema, table)``: the root tables' topics (the records' messages);
        ``plain_tables``: tables whose events also go to ``inner`` as they are."""
        self.inner = inner
        self.stage = stage
        self._topic_of = topic_of
        self._joined = stage.tables()
        self._plain = plain_tables
        self._next: dict[TopicPartition, int] = {}
        self.resume: dict[TopicPartition, int] = {}
        self._admitted: set[TopicPartition] = set()

    @property
    def store(self) -> JoinStore:
        return self.stage.store

    def open(self) -> None:
        """Open the inner sink and write what a crash left pending."""
        self.inner.open()
        self._next = self.store.next_offsets()
        self.resume = dict(self._next)
        if self.store.pending():
            records = self._records(0)
            self._write_records(records)
            self.flush()

    def admit(self, messages: Sequence[Message], consumer: Consumer,
              start_offset: StartOffset) -> list[Message]:
        """``messages`` without those of a partition read past where the store stops (a
        group's offset ahead of a new store): that partition is sent back there."""
        firsts: dict[TopicPartition, int] = {}
        for message in messages:
            where = TopicPartition(message.topic, message.partition)
            if where not in self._admitted and where not in firsts:
                firsts[where] = message.offset
        refused: set[TopicPartition] = set()
        for where, first in firsts.items():
            expected = self.resume.get(where)
            if expected is None:
                expected = start_offset(where)
            if first > expected:
                log.info("joined views: %s read from offset %d, the store stops at %d; "
                         "reading from there", where, first, expected)
                consumer.seek(where, expected)
                refused.add(where)
            else:
                self._admitted.add(where)
        if not refused:
            return list(messages)
        return [m for m in messages if TopicPartition(m.topic, m.partition) not in refused]

    def write(self, batch: Sequence[SinkEvent]) -> WriteResult:
        """Apply the batch's new events to the store, then write the touched records
        and the other events."""
        rejected: list[Rejection] = []
        passed: list[SinkEvent] = []
        applied: list[tuple[SinkEvent, Table]] = []
        offsets: dict[TopicPartition, int] = {}
        for item in batch:
            message = item.message
            table = _table_of(item)
            if table not in self._joined or table in self._plain:
                passed.append(item)
            if table not in self._joined:
                continue
            where = TopicPartition(message.topic, message.partition)
            if message.offset < self._next.get(where, 0):
                continue  # applied before (read again after a restart or a retry)
            offsets[where] = max(offsets.get(where, 0), message.offset + 1)
            applied.append((item, table))
        at_least = max((item.version for item, _ in applied), default=0)
        with self.store.transaction():
            for item, table in applied:
                try:
                    self.stage.apply(item, table)
                except ValueError as exc:
                    rejected.append(Rejection(item, f"joined views: {exc}"))
            self.store.set_offsets(offsets)
            if applied:
                self.store.forget_old_deletes()
            records = self._records(at_least)
        self._next.update(offsets)
        result = self.inner.write(passed) if passed else WriteResult()
        rejected.extend(result.rejected)
        rejected.extend(self._write_records(records))
        return WriteResult(rejected)

    def flush(self) -> None:
        """Flush the inner sink; then nothing is pending."""
        self.inner.flush()
        with self.store.transaction():
            self.store.clear_pending()

    def close(self) -> None:
        """Close the inner sink and the store."""
        try:
            self.inner.close()
        finally:
            self.store.close()

    def _records(self, at_least: int) -> list[SinkEvent]:
        """Every pending record as an event of its root table, versioned (inside the
        store transaction)."""
        built: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any] | None]] = []
        views = {view.target: view for view in self.stage.views}
        for target, keys in self.store.pending().items():
            view = views.get(target)
            if view is None:
                continue  # a view removed from the config since
            for stored_key in keys:
                root_key, record = self.stage.record(view, stored_key)
                schema, table = view.table
                built.append((self._topic_of(schema, table), {"schema": schema,
                              "table": table}, root_key, record))
        if not built:
            return []
        first = self.store.versions(len(built), at_least)
        now = int(time.time() * 1000)
        events = []
        for number, (topic, source, key, record) in enumerate(built):
            version = first + number
            event = {"op": "d" if record is None else "u", "key": key, "before": None,
                     "after": record, "source": source}
            message = Message(topic, 0, -1, now, orjson.dumps(key), orjson.dumps(event),
                              Position(version >> 10, version & 1023), record is None)
            events.append(SinkEvent(message, event, version))
        return events

    def _write_records(self, records: list[SinkEvent]) -> list[Rejection]:
        """Write ``records``; one by one when the sink refuses them together."""
        if not records:
            return []
        try:
            return self.inner.write(records).rejected
        except TerminalError:
            rejected: list[Rejection] = []
            for record in records:
                try:
                    rejected.extend(self.inner.write([record]).rejected)
                except TerminalError as exc:
                    rejected.append(Rejection(record, f"{type(exc).__name__}: {exc}"))
            return rejected


def _table_of(item: SinkEvent) -> Table:
    source = item.event.get("source") or {}
    return str(source.get("schema")), str(source.get("table"))
