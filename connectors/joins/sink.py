"""``JoinedSink``: a sink's joined views, in front of the sink that writes their records.

The events of the tables a joined view reads go to the state store (``JoinStage``),
every one of them (the runtime does not coalesce a joined sink's batches: a key
change's delete completes its insert);
the records they touch are written by the inner sink (OpenSearch, Redis) as events of
the root table, one per root key, through a pass-through view to the joined view's
target. Other events go to the inner sink as they are.

The store is ahead of the target, never behind, so a record never goes back:

1. ``write`` applies the batch's new events (offset at or past the store's) and marks
   the records they touch pending, with the offsets, in one durable store transaction;
   then, unless they are deferred while the connector catches up (``_due``), it builds
   the pending records a page at a time, each page's versions handed out durably first
   (above every earlier one, across restarts, and at least the events' own
   ``version_of``), and the inner sink writes them.
2. ``flush`` flushes the inner sink, then clears what was written from the pending.
   An idle connector writes what was deferred (``write_deferred``).

After a crash the store holds exactly the events before its offsets: earlier ones read
again are skipped, and pending records are written again when the sink opens. A new
store (a new host, a deleted file) reads the topics from their first offset
(``admit``), whatever the group committed.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from itertools import groupby
from operator import itemgetter
from typing import ParamSpec, TypeVar

import orjson

from cdc.errors import TerminalError
from cdc.log import Consumer, Message, Position, TopicPartition
from cdc.native import CORE
from connectors.contract import (
    Rejection,
    Sink,
    SinkEvent,
    SinkStateLostError,
    SinkUnavailableError,
    WriteResult,
)
from derived import JoinedView

from .stage import JoinStage
from .store import HeldBatchesLost, JoinStore, Table, key_json, table_id

log = logging.getLogger(__name__)

StartOffset = Callable[[TopicPartition], int]
T = TypeVar("T")
P = ParamSpec("P")

DEFER_RECORDS = 50_000  # pending records written at the latest once this many are marked
DEFER_SECONDS = 2.0  # … or once they waited this long
RECORDS_PER_WRITE = 2_000
HOLD_EVENTS = 20_000  # deferred batches are applied in one store transaction up to this
HOLD_SECONDS = 1.0  # many events, or this long (a crash then reads them again)
SPLIT_GRACE_S = 120.0  # a topic held in part this long stops the connector (a Kafka
# group keeps a crashed member's partitions for its session timeout, 45 s by default)
SPLIT_PAUSE_S = 0.2


def _store_failures_retried(method: Callable[P, T]) -> Callable[P, T]:
    """``method``, its state store's failures (a locked database, a full disk) raised as
    ``SinkUnavailableError``: retried until they pass, never taken for the events' fault
    (a refused batch is split into dead letters, which the store would then lack)."""
    @functools.wraps(method)
    def retried(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            raise SinkUnavailableError(f"joined views: the state store failed: {exc}") from exc
    return retried


class SplitJoinError(TerminalError):
    """Another member of the group reads some partitions of a joined view's topic."""

    def __init__(self, topic: str, held: list[int], count: int) -> None:
        super().__init__(
            f"joined views need every partition of {topic} in one consumer, but this one "
            f"holds {held} of its {count}: another process runs the same connector; run a "
            "connector with joins in one process")


class JoinedSink:
    """Joined views in front of ``inner`` (see the module docstring)."""

    def __init__(self, inner: Sink, stage: JoinStage, topic_of: Callable[[str, str], str],
                 plain_tables: set[Table], batch_size: int) -> None:
        """``topic_of(schema, table)``: the root tables' topics (the records' messages);
        ``plain_tables``: tables whose events also go to ``inner`` as they are;
        ``batch_size``: the connector's (a smaller batch means it has caught up)."""
        self.inner = inner
        self.stage = stage
        self._topic_of = topic_of
        self._joined = stage.tables()
        self._plain = plain_tables
        self._next: dict[TopicPartition, int] = {}
        self.resume: dict[TopicPartition, int] = {}
        self._admitted: set[TopicPartition] = set()
        self._sought: set[TopicPartition] = set()  # sent back to where the store stops
        self._counts: dict[str, int] = {}  # partitions per topic
        self._split_since: dict[str, float] = {}  # topics held in part, since when
        self._batch_size = batch_size
        self._marked = 0  # records marked pending since the last written (an estimate)
        # an initial load into a new store marks its records all at once when it ends
        # (``JoinStore.begin_load``): possible until then, and under way
        self._may_load = False
        self._loading = False
        self._roots = {view.target: view.table for view in stage.views}
        self._deferred_since: float | None = None
        self._flushes_pending = False
        self._at_least = 0
        self._writes: ThreadPoolExecutor | None = None  # writes a page while the next is built
        self._held_events = 0  # applied in the store's transaction held open (``_commit_held``)
        self._held_since = 0.0
        self._broken: HeldBatchesLost | None = None  # applied batches were undone

    @property
    def store(self) -> JoinStore:
        return self.stage.store

    def open(self) -> None:
        """Open the inner sink and write what a crash left pending."""
        self.inner.open()
        for view in self.stage.views:
            tables = {table_id(table) for table in view.tables()} & self.store.reindexed
            if tables:
                marked = self.store.mark_every_row(view.target, view.table)
                log.warning("joined view %s: the join columns of %s changed since its state "
                            "was written; re-indexed them and writing its %d records again",
                            view.target, ", ".join(sorted(tables)), marked)
        self._next = self.store.next_offsets()
        self.resume = dict(self._next)
        if self.store.loading():  # stopped during an initial load: its records are due
            with self.store.transaction():
                marked = self.store.end_load(self._roots)
            log.info("joined views: the initial load stopped half-way; writing the %d "
                     "records of the rows it applied", marked)
        self._may_load = not self._next  # a new store: nothing applied yet
        if self.store.has_pending():
            self._marked = 1
            self._flushes_pending = True
            self._write_pending()
            self.flush()

    def admit(self, messages: Sequence[Message], consumer: Consumer,
              start_offset: StartOffset, partitions: Callable[[str], int]) -> list[Message]:
        """``messages`` without those of a partition read past where the store stops (a
        group's offset ahead of a new store): that partition is sent back there.

        The store must see every partition of its topics: while this member of the group
        holds only some of a topic's (a crashed process's member not yet expired, a
        rebalance under way), that topic's messages are sent back and read again later;
        if it lasts ``SPLIT_GRACE_S`` (another process runs the same connector), it stops
        with ``SplitJoinError`` rather than build records from part of the rows."""
        refused = self._partly_held(messages, consumer, partitions)
        firsts: dict[TopicPartition, int] = {}
        for message in messages:
            where = TopicPartition(message.topic, message.partition)
            if where not in self._admitted and where not in firsts and where not in refused:
                firsts[where] = message.offset
        for where, first in firsts.items():
            expected = self.resume.get(where)
            if expected is None:
                expected = start_offset(where)
            if first > expected and where not in self._sought:
                log.info("joined views: %s read from offset %d, the store stops at %d; "
                         "reading from there", where, first, expected)
                consumer.seek(where, expected)
                self._sought.add(where)
                refused.add(where)
            else:  # after a seek, the first record there is the next one (offsets between
                # may hold none: a Kafka transaction's marker, a compacted record)
                self._admitted.add(where)
        if not refused:
            return list(messages)
        return [m for m in messages if TopicPartition(m.topic, m.partition) not in refused]

    def _partly_held(self, messages: Sequence[Message], consumer: Consumer,
                     partitions: Callable[[str], int]) -> set[TopicPartition]:
        """The partitions of the topics this member holds only part of, sent back to their
        first message here (see ``admit``)."""
        now = time.monotonic()
        firsts: dict[TopicPartition, int] = {}
        for message in messages:
            firsts.setdefault(TopicPartition(message.topic, message.partition), message.offset)
        assignment = consumer.assignment()
        refused: set[TopicPartition] = set()
        for topic in sorted({where.topic for where in firsts}):
            count = self._counts.get(topic) or self._counts.setdefault(topic, partitions(topic))
            held = sorted(tp.partition for tp in assignment if tp.topic == topic)
            if len(held) >= count:
                self._split_since.pop(topic, None)
                continue
            since = self._split_since.setdefault(topic, now)
            if now - since >= SPLIT_GRACE_S:
                raise SplitJoinError(topic, held, count)
            if since == now:
                log.warning("joined views: this member holds partitions %s of the %d of %s; "
                            "waiting up to %.0f s for the group to give it every one",
                            held, count, topic, SPLIT_GRACE_S)
            for where, first in firsts.items():
                if where.topic == topic:
                    consumer.seek(where, first)
                    refused.add(where)
        if refused:
            time.sleep(SPLIT_PAUSE_S)  # not to poll the same messages again at once
        return refused

    @_store_failures_retried
    def write(self, batch: Sequence[SinkEvent]) -> WriteResult:
        """Apply the batch's new events to the store, then write the other events and,
        unless they are deferred (``_due``), the touched records."""
        self._check_store()
        rejected: list[Rejection] = []
        passed: list[SinkEvent] = []
        applied: list[tuple[SinkEvent, Table]] = []
        offsets: dict[TopicPartition, int] = {}
        # a new store's snapshot reads as the native core renders them (None: in Python)
        loads = CORE.join_loaded_rows(list(batch)) if self._may_load else None
        loaded: dict[int, tuple[bytes, bytes]] = {}  # id(event) → its stored key and row
        for at, item in enumerate(batch):
            message = item.message
            read = loads[at] if loads is not None else None
            table = _table_of(item) if read is None else (read[0], read[1])
            if table not in self._joined or table in self._plain:
                passed.append(item)
            if table not in self._joined:
                continue
            where = TopicPartition(message.topic, message.partition)
            if message.offset < self._next.get(where, 0):
                continue  # applied before (read again after a restart or a retry)
            offsets[where] = max(offsets.get(where, 0), message.offset + 1)
            applied.append((item, table))
            if read is not None:
                loaded[id(item)] = (read[2], read[3])
        self._at_least = max((item.version for item, _ in applied), default=self._at_least)
        if applied and not self.store.held:
            self._held_since = time.monotonic()
        loading = bool(applied) and all(id(item) in loaded or item.event.get("op") == "r"
                                        for item, _ in applied)
        # snapshot reads into a new store: their records are marked when the load ends
        bulk = self._may_load and loading
        ends_load = self._loading and bool(applied) and not loading
        try:
            with self.store.batch():
                if bulk and not self._loading:
                    self.store.begin_load(self._roots)
                if ends_load:
                    self._marked += self.store.end_load(self._roots)
                self.stage.preload(applied, touch=not bulk)
                for item, table in applied:
                    try:
                        if bulk and (stored := loaded.get(id(item))) is not None:
                            self.stage.load(table, *stored, item.message.position)
                        else:
                            self._marked += self.stage.apply(item, table, touch=not bulk)
                    except ValueError as exc:
                        rejected.append(Rejection(item, f"joined views: {exc}"))
                self.store.set_offsets(offsets)
                if applied:
                    self.store.forget_old_deletes()
        except HeldBatchesLost as lost:
            raise self._lost(lost) from lost
        if bulk:
            self._loading = True
            self._marked += len(applied)  # an estimate: ``end_load`` marks them
        elif ends_load:
            self._loading = self._may_load = False
        elif applied:
            self._may_load = False
        self._next.update(offsets)
        self._held_events += len(applied)
        result = self.inner.write(passed) if passed else WriteResult()
        rejected.extend(result.rejected)
        self._flushes_pending = self._due(len(batch), loading)
        if self._flushes_pending:
            rejected.extend(self._write_pending())
        elif (self._held_events >= HOLD_EVENTS
              or time.monotonic() - self._held_since >= HOLD_SECONDS):
            self._commit_held()
        return WriteResult(rejected)

    def _commit_held(self) -> None:
        """Commit the batches the store holds open (``HOLD_EVENTS``): while a connector
        catches up, its batches are applied in one store transaction, not one each."""
        self._held_events = 0
        try:
            self.store.commit_held()
        except HeldBatchesLost as lost:
            raise self._lost(lost) from lost

    def _lost(self, lost: HeldBatchesLost) -> SinkStateLostError:
        """The error that stops the worker once applied batches were undone: their
        offsets may be committed already, so the connector must start again from the
        store's (``open``), which reads them again."""
        self._broken = lost
        return SinkStateLostError(
            f"joined views: the state store lost the batches it held open ({lost.__cause__});"
            " the connector starts again from the store's last commit")

    def _check_store(self) -> None:
        if self._broken is not None:
            raise self._lost(self._broken)

    @_store_failures_retried
    def write_deferred(self) -> list[Rejection]:
        """Write and flush the records deferred while catching up, if any (the runtime
        calls this when the connector is idle, nothing in flight); the refused ones."""
        self._check_store()
        if self._marked == 0:
            self._commit_held()
            return []
        self._flushes_pending = True
        rejected = self._write_pending()
        self.flush()
        return rejected

    def _due(self, batch_size: int, loading: bool) -> bool:
        """Whether the pending records are written now: when the batch was not full (the
        connector has caught up), or enough are pending, or they waited long enough —
        except while a full batch holds only snapshot reads (``loading``: an initial
        load, written once it is read). While a connector catches up, a record touched
        by many events (an order and its items) is so built once, not once per batch."""
        now = time.monotonic()
        if self._marked == 0:
            return False
        if loading and batch_size >= self._batch_size:
            self._deferred_since = self._deferred_since or now
            return False
        if (batch_size < self._batch_size or self._marked >= DEFER_RECORDS
                or now - (self._deferred_since or now) >= DEFER_SECONDS):
            self._deferred_since = None
            return True
        self._deferred_since = self._deferred_since or now
        return False

    @_store_failures_retried
    def flush(self) -> None:
        """Flush the inner sink; then what was written is no longer pending."""
        self._check_store()
        self.inner.flush()
        if self._flushes_pending:
            with self.store.transaction():
                self.store.clear_pending()
            self._marked = 0
            self._flushes_pending = False

    def close(self) -> None:
        """Close the inner sink and the store (committing what it holds open)."""
        try:
            if self._broken is None:
                try:
                    self._commit_held()
                except SinkStateLostError as exc:  # behind then, never wrong
                    log.warning("%s", exc)
            if self._writes is not None:
                self._writes.shutdown()
            self.inner.close()
        finally:
            self.store.close()

    def _write_pending(self) -> list[Rejection]:
        """Build and write every pending record, ``RECORDS_PER_WRITE`` at a time, their
        versions handed out (durably, in one commit for them all) before any is built; a
        page is built while the one before it is written."""
        self._commit_held()  # what the records are built from is committed, then durable
        if self._loading:  # the initial load's records, all of them
            with self.store.transaction():
                self.store.end_load(self._roots)
            self._loading = self._may_load = False
        views = {view.target: view for view in self.stage.views}
        rejected: list[Rejection] = []
        writing: Future[list[Rejection]] | None = None
        first, left = 0, 0  # the next version handed out, and how many are left
        try:
            for page in self.store.pending_pages(RECORDS_PER_WRITE):
                # a view removed from the config since: its records are dropped
                chunk = [(target, key) for target, key in page if target in views]
                if len(chunk) > left:
                    left = max(len(chunk), self.store.pending_count())
                    with self.store.transaction(durable=True):
                        first = self.store.versions(left, self._at_least)
                records = self._records(views, chunk, first)
                first, left = first + len(chunk), left - len(chunk)
                if writing is not None:
                    rejected.extend(writing.result())
                writing = self._writer().submit(self._write_records, records)
            if writing is not None:
                rejected.extend(writing.result())
        finally:  # also on a failure: the inner sink is never written by two threads
            if writing is not None:
                wait([writing])
        return rejected

    def _writer(self) -> ThreadPoolExecutor:
        if self._writes is None:
            self._writes = ThreadPoolExecutor(1, thread_name_prefix="joined-records")
        return self._writes

    def _records(self, views: dict[str, JoinedView], chunk: list[tuple[str, bytes]],
                 first: int) -> list[SinkEvent]:
        """The current records of ``chunk`` (target, key) as events of their root tables,
        versions from ``first`` on."""
        now = int(time.time() * 1000)
        records: list[SinkEvent] = []
        for target, keyed in groupby(chunk, key=itemgetter(0)):
            view = views[target]
            schema, table = view.table
            topic = self._topic_of(schema, table)
            source = {"schema": schema, "table": table}
            for stored, record in self.stage.records(view, [key for _, key in keyed]):
                version = first + len(records)
                key = key_json(stored)
                event = {"op": "d" if record is None else "u", "key": orjson.loads(key),
                         "before": None, "after": record, "source": source}
                message = Message(topic, 0, -1, now, key, orjson.dumps(event),
                                  Position(version >> 10, version & 1023), record is None)
                records.append(SinkEvent(message, event, version))
        return records

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
