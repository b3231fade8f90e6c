"""Reading the initial snapshot's tables: few connections, few transactions, and no
schema change can crash it.

A few worker connections (``snapshot_parallel_tables``, default one per CPU) each import
the exported snapshot once and read table after table in that one transaction, so a
schema of thousands of small tables costs neither a connection nor a transaction per
table. A worker starts a fresh transaction (the same snapshot again) before a big table,
after ``TABLES_PER_TRANSACTION`` tables and when its transaction is older than
``TRANSACTION_MAX_S``, so the locks it holds on tables it has read neither stay for hours
in the way of migrations nor exhaust ``max_locks_per_transaction``.

A table bigger than ``snapshot_range_mb`` (PostgreSQL 14+) is cut into ranges of pages,
each read by ``ctid`` (a TID range scan) in a transaction of its own by whichever worker
is free, so one big table is read by all the workers at once. Every row lies in exactly
one page range, and every range is read in the same snapshot: the rows are read once.
The table is reported read once its last range's rows are durable; the first range to
find it dropped or rewritten gives it up for all of them.

At a table's turn (``TableCheck``, one round trip, under its ACCESS SHARE lock):

- dropped since the snapshot began: skipped with a warning (renamed: read while
  streaming, under its new name);
- rewritten or truncated since (a new relfilenode: inside the old snapshot it would look
  empty): read while streaming instead, by the incremental (watermark) method;
- columns changed (added, dropped, renamed, retyped): its relation is read again and
  recorded as a new schema version; the snapshot's rows are read with the current
  columns (an added column holds its default, a dropped one is left out).

Rows are read in chunks of COPY text and converted by the native core
(``snapshot/native.py``; a table whose column types it does not know: by ``read_event``
row by row). Rows are
numbered ``(consistent_point, seq)`` and appended in batches that may hold many
small tables; a table is reported read (``on_tables_read``) only after its last rows are
durable.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg
from psycopg import sql

from cdc.crashpoints import crash_point
from cdc.log import Position, Producer, Record
from cdc.native import CORE

from ..events import CommitInfo, TableShape, complete, read_event, truncate_event
from ..lsn import format_lsn
from ..schema.shapes import ShapeRegistry
from ..source import session
from .catalog import (
    CatalogTable,
    PageRange,
    TableCheck,
    catalog_tables,
    page_ranges,
    snapshot_query,
)
from .copy import BATCH_ROWS, copy_batches, copy_chunks, copy_chunks_ahead
from .native import CopyChunk, NativeTable
from .progress import SnapshotProgress

log = logging.getLogger(__name__)

TRANSACTION_MAX_S = 2.0  # a worker's transaction (and its locks) is renewed after this
BIG_TABLE_BYTES = 16 << 20  # a table this big starts a fresh transaction
TABLES_PER_TRANSACTION = 200  # locks held at once stay far below max_locks_per_transaction
TID_RANGE_SCANS = 140000  # the first server version that reads a ctid range without a scan
_SAVEPOINT = sql.SQL("SAVEPOINT distributary_table")
_RENEW_SAVEPOINT = sql.SQL("RELEASE SAVEPOINT distributary_table; SAVEPOINT distributary_table")


@dataclass
class SnapshotOutcome:
    """What the initial snapshot did with each table."""

    rows: int = 0
    read: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # dropped since the snapshot began
    deferred: list[str] = field(default_factory=list)  # to read while streaming instead


class _SnapshotWriter:
    """Numbers the rows of all tables ``(point, seq)`` and appends them in batches of
    ``BATCH_ROWS`` records; tells ``on_tables_read`` which tables are complete once their
    rows are durable. With a producer that takes rows encoded natively
    (``append_encoded``), chunks converted by the native core stay in one native buffer
    (``SnapshotBatch``) instead of a ``Record`` per row; batches are cut the same.

    A batch is appended in a thread of its own while the next one is converted: one
    batch in flight at a time, appended (and its tables reported) in order; the producer
    is used by nobody else until it is done (``settle`` waits for it). With a file log
    (``append_encoded``) a batch is only written there, and made durable by a thread of
    its own while the next batch is written: its tables are reported (and its crash
    point passed) once that sync has ended."""

    def __init__(self, producer: Producer, commit: CommitInfo,
                 on_tables_read: Callable[[list[str]], None] | None,
                 on_deferred: Callable[[str], None] | None = None) -> None:
        self.producer = producer
        self._on_deferred = on_deferred
        self.commit = commit
        self.seq = 0
        self.truncates = 0
        self._on_tables_read = on_tables_read
        # the batch being filled, in order: runs of records, and natively encoded rows
        self._parts: list[list[Record] | CORE.SnapshotBatch] = []
        self._count = 0  # records in ``_parts``
        self._append_encoded = getattr(producer, "append_encoded", None)
        self._done: list[str] = []
        self._lock = threading.Lock()
        self._appender: ThreadPoolExecutor | None = None
        self._in_flight: Future[None] | None = None
        self._syncer: ThreadPoolExecutor | None = None
        # the sync of the batch written last, and the tables that batch completed
        self._syncing: tuple[Future[None], list[str]] | None = None

    def schema(self, record: Record) -> None:
        """A schema record, appended before the rows that follow it."""
        with self._lock:
            self._records([record])

    def truncate(self, shape: TableShape) -> None:
        """A truncate event before the table's rows (a snapshot from a new slot over a log
        that already holds the table: rows deleted meanwhile must not survive)."""
        self._events([truncate_event(shape, False, False, self.commit.commit_lsn)])
        self.truncates += 1

    def rows(self, shape: TableShape, rows: list[list[str | None]] | CopyChunk) -> None:
        """Rows of ``shape``'s table, as COPY text values, or a chunk of COPY text lines
        for the native core."""
        if isinstance(rows, CopyChunk):
            self._chunk(rows)
            return
        lsn = self.commit.commit_lsn
        self._events([read_event(shape, values, lsn) for values in rows])

    @property
    def encodes(self) -> bool:
        """True when the producer takes rows grouped and encoded natively."""
        return self._append_encoded is not None

    def _records(self, records: list[Record]) -> None:
        last = self._parts[-1] if self._parts else None
        if isinstance(last, list):
            last.extend(records)
        else:
            self._parts.append(records)
        self._count += len(records)

    def _chunk(self, chunk: CopyChunk) -> None:
        with self._lock:
            if self._append_encoded is not None:
                self._encode(chunk.table, chunk.data)
                return
            records = chunk.table.records(chunk.data, self.commit, self.seq)
            self.seq += len(records)
            rest = records
            while rest:  # appended BATCH_ROWS at a time, as the text rows are
                room = max(1, BATCH_ROWS - self._count)
                self._records(rest[:room])
                rest = rest[room:]
                if self._count >= BATCH_ROWS:
                    self._flush()

    def _encode(self, table: NativeTable, data: bytes) -> None:
        """``data``'s rows encoded natively, cut into batches exactly where the records
        path cuts them (a chunk may end one batch and start the next)."""
        lines = data.count(b"\n")  # every COPY line ends with one (``copy_chunks``)
        while lines:
            room = max(1, BATCH_ROWS - self._count)
            if lines > room:
                end = CORE.after_lines(data, room)  # where the first ``room`` lines end
                head, data, taken = data[:end], data[end:], room
            else:
                head, taken = data, lines
            last = self._parts[-1] if self._parts else None
            into = last if isinstance(last, CORE.SnapshotBatch) else None
            rows = table.rows(head, self.commit, self.seq, into)
            if rows is not into:
                self._parts.append(rows)
            self.seq += taken
            self._count += taken
            lines -= taken
            if self._count >= BATCH_ROWS:
                self._flush()

    def _events(self, events: Sequence[Any]) -> None:
        with self._lock:
            seq = self.seq
            self._records([Record(e.topic, e.key, complete(e, self.commit, seq + i),
                                  Position(self.commit.commit_lsn, seq + i))
                           for i, e in enumerate(events)])
            self.seq = seq + len(events)
            if self._count >= BATCH_ROWS:
                self._flush()

    def table_done(self, table: str) -> None:
        """Every row of ``table`` was handed over (reported once durable)."""
        with self._lock:
            self._done.append(table)

    def deferred(self, table: str) -> None:
        """``table`` is to be read while streaming: report it now (durably, before the
        snapshot can be recorded complete or interrupted)."""
        with self._lock:
            if self._on_deferred is not None:
                self._settle()  # the producer is this thread's now
                self._on_deferred(table)

    def flush(self) -> None:
        """Append what is buffered, then report the tables it completed; return once
        that is done."""
        with self._lock:
            self._flush()
            self._settle()

    def settle(self, *, quiet: bool = False) -> None:
        """Wait for the batch in flight and its sync (an error raised here, or only logged
        when ``quiet``) and stop the appending threads; what is still buffered is
        dropped."""
        with self._lock:
            try:
                self._settle()
            except Exception:
                if not quiet:
                    raise
                log.exception("appending a snapshot batch failed too")
            finally:
                self._syncing = None
                for pool in (self._appender, self._syncer):
                    if pool is not None:
                        pool.shutdown()
                self._appender = self._syncer = None

    def _settle(self) -> None:
        """Wait for the batch in flight, then for its sync (its tables reported)."""
        try:
            self._settle_append()
        finally:
            self._await_sync()

    def _settle_append(self) -> None:
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None:
            in_flight.result()

    def _await_sync(self) -> None:
        """Wait for the sync of the batch written last, then report the tables it
        completed (in the thread that uses the producer then)."""
        syncing, self._syncing = self._syncing, None
        if syncing is None:
            return
        synced, done = syncing
        synced.result()
        crash_point("snapshot_batch")
        self._report(done)

    def _report(self, done: list[str]) -> None:
        if done and self._on_tables_read is not None:
            self._on_tables_read(done)

    def _flush(self) -> None:
        """Hand the buffered batch to the appending thread, once the one before it is
        written."""
        parts, self._parts, self._count = self._parts, [], 0
        done, self._done = self._done, []
        self._settle_append()
        if not parts and not done:
            return
        if self._appender is None:
            self._appender = ThreadPoolExecutor(1, thread_name_prefix="snapshot-append")
        self._in_flight = self._appender.submit(self._append, parts, done)

    def _append(self, parts: list[list[Record] | CORE.SnapshotBatch], done: list[str]) -> None:
        """Append one batch; report the tables it completed once it is durable: at once,
        or (a file log) once the sync started here has ended, after the next batch was
        written."""
        sync = None
        if parts:
            if self._append_encoded is not None:
                sync = self._append_encoded(parts, durable=False)  # durable once sync() ran
            else:
                assert len(parts) == 1 and isinstance(parts[0], list)  # records only then
                self.producer.append(parts[0])  # durable when it returns
        self._await_sync()  # the batch before this one: its sync ran while this was written
        if sync is None:
            if parts:
                crash_point("snapshot_batch")
            self._report(done)
            return
        if self._syncer is None:
            self._syncer = ThreadPoolExecutor(1, thread_name_prefix="snapshot-sync")
        self._syncing = (self._syncer.submit(sync), done)


@dataclass
class _Reading:
    """What the workers share."""

    dsn: str
    snapshot_name: str
    shapes: ShapeRegistry
    writer: _SnapshotWriter
    progress: SnapshotProgress
    catalog_conn: psycopg.Connection[Any]
    outcome: SnapshotOutcome
    lock: threading.Lock = field(default_factory=threading.Lock)
    failed: threading.Event = field(default_factory=threading.Event)
    publication: str | None = None  # its column lists and row filters are read

    def relearn(self, entry: CatalogTable) -> TableShape | None:
        """Read ``entry``'s relation again from the catalog (its lock is held, so it is
        stable) and record a new schema version if it changed; None if it is gone."""
        schema, table = entry.relation.namespace, entry.relation.name
        with self.lock:
            found = catalog_tables(self.catalog_conn, [(schema, table)],
                                   self.publication).get((schema, table))
            if found is None or found.relation.oid != entry.relation.oid:
                return None
            record = self.shapes.learn(found.relation)
            if record is not None:
                self.writer.schema(record)
                log.info("%s changed since the snapshot began: read with its current "
                         "columns", entry.name)
            return self.shapes.get(found.relation.oid)

    def renamed_to(self, oid: int) -> str | None:
        """The current name of relation ``oid``, or None when it no longer exists."""
        with self.lock:
            row = self.catalog_conn.execute(
                "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE c.oid = %s", (oid,)).fetchone()
        return f"{row[0]}.{row[1]}" if row is not None else None

    def note(self, kind: str, table: str) -> None:
        with self.lock:
            getattr(self.outcome, kind).append(table)
        if kind == "deferred":
            self.writer.deferred(table)


@dataclass
class _Split:
    """What the page ranges of one table share: the table is started once, reported read
    once its last range is done, and given up (dropped, rewritten) by the first range to
    find so."""

    left: int  # ranges not done yet
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: bool = False
    given_up: bool = False


@dataclass(frozen=True, slots=True)
class _Work:
    """A table to read, or one page range of it."""

    entry: CatalogTable
    pages: PageRange | None = None
    split: _Split | None = None
    block_size: int = 8192

    @property
    def size_bytes(self) -> int | None:
        """What the range (or table) holds on disk; None: unknown (partitioned)."""
        size = self.entry.size_bytes
        if self.pages is None or size is None:
            return size
        end = self.pages.end if self.pages.end is not None else size // self.block_size
        return max(0, end - self.pages.first) * self.block_size


def _split(entries: list[CatalogTable], range_bytes: int | None,
           block_size: int) -> list[_Work]:
    """Each table as one piece of work, or (bigger than ``range_bytes``) as its page
    ranges."""
    work: list[_Work] = []
    for entry in entries:
        ranges = (page_ranges(entry.size_bytes, block_size, range_bytes)
                  if range_bytes and entry.size_bytes is not None else [])
        if len(ranges) < 2:
            work.append(_Work(entry))
            continue
        shared = _Split(len(ranges))
        work += [_Work(entry, pages, shared, block_size) for pages in ranges]
    return work


def _block_size(conn: psycopg.Connection[Any]) -> int:
    """The server's page size (8 KiB unless built otherwise)."""
    row = conn.execute("SELECT current_setting('block_size')::int").fetchone()
    return int(row[0]) if row is not None else 8192


def _give_up(work: _Work) -> bool:
    """True when this table is to be reported dropped or deferred by this piece of work
    (a table read in ranges: by the first range to find it so)."""
    if work.split is None:
        return True
    with work.split.lock:
        first, work.split.given_up = not work.split.given_up, True
    return first


def _start(reading: _Reading, work: _Work) -> bool:
    """Start reading ``work``'s table (once for all its ranges); False: another range
    gave the table up."""
    split, entry = work.split, work.entry
    if split is None:
        reading.progress.start(entry.name, entry.estimated_rows)
        return True
    with split.lock:
        if split.given_up:
            return False
        if not split.started:
            split.started = True
            reading.progress.start(entry.name, entry.estimated_rows)
    return True


def _read_one(reading: _Reading, conn: psycopg.Connection[Any], work: _Work,
              savepoint: sql.Composable) -> None:
    """Read one table, or one page range of it, inside the worker's open snapshot
    transaction."""
    entry = work.entry
    relation = entry.relation
    schema, table, name = relation.namespace, relation.name, entry.name
    if work.split is not None and work.split.given_up:
        return
    try:
        check = TableCheck.run(conn.cursor(), schema, table, relation.oid, savepoint)
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
        conn.execute("ROLLBACK TO SAVEPOINT distributary_table")
        check = TableCheck(True, True, False, ())
    if check.dropped:
        if not _give_up(work):
            return
        current = reading.renamed_to(relation.oid)
        if current is not None and current != name:
            log.warning("%s was renamed to %s since the snapshot began: it is read while "
                        "streaming", name, current)
            reading.note("deferred", current)
        else:
            log.warning("%s was dropped since the snapshot began: skipped", name)
            reading.note("skipped", name)
            reading.writer.table_done(name)
        return
    if check.rewritten:
        if _give_up(work):
            log.warning("%s was rewritten or truncated since the snapshot began: it is "
                        "read while streaming (incremental snapshot)", name)
            reading.note("deferred", name)
        return
    shape = reading.shapes.get(relation.oid)
    if check.in_snapshot and check.star != entry.star:
        changed = reading.relearn(entry)
        if changed is None:  # cannot happen under the lock; stay safe
            if _give_up(work):
                reading.note("deferred", name)
            return
        shape = changed
    if not _start(reading, work):
        return
    if check.in_snapshot:
        query = snapshot_query(schema, table, shape.columns, entry.row_filter, work.pages)
        native = NativeTable.of(shape)
        if native is not None:
            # the next chunk is read while this one is converted and appended
            chunks = (copy_chunks_ahead(conn, query) if reading.writer.encodes
                      else copy_chunks(conn, query))
            for data in chunks:
                reading.writer.rows(shape, CopyChunk(native, data))
                reading.progress.advance(name, data.count(b"\n"))
        else:
            for batch in copy_batches(conn, query):
                reading.writer.rows(shape, batch)
                reading.progress.advance(name, len(batch))
    if work.split is not None:
        with work.split.lock:
            work.split.left -= 1
            if work.split.left or work.split.given_up:
                return  # the table is reported by its last range
    reading.progress.finish(name)
    reading.note("read", name)
    reading.writer.table_done(name)


def _worker(reading: _Reading, tables: queue.SimpleQueue[_Work]) -> None:
    """Read tables (or their ranges) from the queue in as few snapshot transactions as
    the rules allow."""
    begin = sql.SQL("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
                    "SET TRANSACTION SNAPSHOT {}").format(sql.Literal(reading.snapshot_name))
    with session.connect(reading.dsn) as conn:
        opened, count = 0.0, 0
        while not reading.failed.is_set():
            try:
                work = tables.get_nowait()
            except queue.Empty:
                break
            size = work.size_bytes
            big = size is None or size > BIG_TABLE_BYTES
            if count and (big or count >= TABLES_PER_TRANSACTION
                          or time.monotonic() - opened > TRANSACTION_MAX_S):
                conn.execute("ROLLBACK")
                count = 0
            if count == 0:
                conn.execute(begin)
                opened = time.monotonic()
            try:
                _read_one(reading, conn, work, _RENEW_SAVEPOINT if count else _SAVEPOINT)
            except BaseException:
                reading.failed.set()  # the other workers stop too: the session ends
                raise
            count += 1
        if count:
            conn.execute("ROLLBACK")


def read_tables(dsn: str, snapshot_name: str, consistent_point: int, *,
                shapes: ShapeRegistry, producer: Producer, tables: list[tuple[str, str]],
                database: str, workers: int | None = None,
                progress: SnapshotProgress | None = None,
                truncate_first: frozenset[str] = frozenset(),
                on_tables_read: Callable[[list[str]], None] | None = None,
                on_deferred: Callable[[str], None] | None = None,
                publication: str | None = None,
                range_bytes: int | None = None) -> SnapshotOutcome:
    """Read ``tables`` inside the exported snapshot and append them (see the module
    docstring). ``truncate_first``: tables whose truncate event precedes their rows;
    ``on_tables_read``: tables whose rows are all durable; ``on_deferred``: a table to
    read while streaming instead (called at once, before any later append);
    ``publication``: read only the columns and rows it publishes; ``range_bytes``: a
    table bigger than this is read as page ranges of about this size, by all the
    workers at once (PostgreSQL 14+; None: each table by one worker)."""
    commit = CommitInfo(orjson.dumps(database), consistent_point, 0,
                        datetime.now(UTC).isoformat(timespec="microseconds")
                        .replace("+00:00", "Z"), snapshot=True)
    writer = _SnapshotWriter(producer, commit, on_tables_read, on_deferred)
    outcome = SnapshotOutcome()
    display = progress or SnapshotProgress()
    try:
        with session.connect(dsn) as catalog_conn:
            found = catalog_tables(catalog_conn, tables, publication)
            entries: list[CatalogTable] = []
            for schema, table in tables:
                entry = found.get((schema, table))
                if entry is None:
                    log.warning("%s.%s no longer exists: skipped", schema, table)
                    outcome.skipped.append(f"{schema}.{table}")
                    writer.table_done(f"{schema}.{table}")
                    continue
                record = shapes.learn(entry.relation)
                if record is not None:
                    writer.schema(record)
                if entry.name in truncate_first:
                    writer.truncate(shapes.get(entry.relation.oid))
                entries.append(entry)
            entries.sort(key=lambda e: -1 if e.size_bytes is None else e.size_bytes,
                         reverse=True)
            if catalog_conn.info.server_version < TID_RANGE_SCANS:
                range_bytes = None  # a ctid range would be a scan of the whole table
            work = _split(entries, range_bytes, _block_size(catalog_conn) if range_bytes else 0)
            pending: queue.SimpleQueue[_Work] = queue.SimpleQueue()
            for piece in work:
                pending.put(piece)
            count = max(1, min(len(work), workers or os.cpu_count() or 1))
            ranged = len({id(w.split) for w in work if w.split is not None})
            log.info("initial snapshot of %d tables (%d read as %d page ranges), "
                     "%d connections", len(entries), ranged,
                     sum(1 for w in work if w.split is not None), count,
                     extra={"lsn": format_lsn(consistent_point)})
            reading = _Reading(dsn, snapshot_name, shapes, writer, display, catalog_conn,
                               outcome, publication=publication)
            if count == 1:
                _worker(reading, pending)
            else:
                with ThreadPoolExecutor(count, thread_name_prefix="snapshot") as pool:
                    for done in [pool.submit(_worker, reading, pending)
                                 for _ in range(count)]:
                        done.result()
            writer.flush()
            writer.settle()
    except BaseException:
        writer.settle(quiet=True)  # the producer is the caller's again
        raise
    finally:
        if progress is None:
            display.close()
    outcome.rows = writer.seq - writer.truncates
    log.info("initial snapshot: %d tables read (%d rows), %d skipped, %d left to read "
             "while streaming", len(outcome.read), outcome.rows, len(outcome.skipped),
             len(outcome.deferred), extra={"lsn": format_lsn(consistent_point)})
    return outcome
