"""The initial snapshot: the published tables as ``r`` events, consistent with the stream.

When the capture creates its slot it asks for an exported snapshot; while the slot's
replication connection stays open, other connections read the tables inside that
snapshot (``REPEATABLE READ``, ``SET TRANSACTION SNAPSHOT``), so the rows are exactly the
state at the slot's consistent point: streaming then starts there, with no gap and no
overlap. Each table is read with ``COPY … TO STDOUT`` (text format) in batches, so memory
stays bounded; several tables at once, each on its own connection importing the same
snapshot; progress per table on stderr (``snapshot_progress``). Values go through the
same codecs as streamed rows. Snapshot events carry the position ``(consistent_point,
seq)``, below every streamed transaction's. Records on ``<prefix>._snapshots`` mark the
snapshot started and completed; a slot this service created whose snapshot never
completed was interrupted and is re-created (its rows are read again); a slot created
by someone else is never dropped. Later snapshots, while streaming, are incremental
(``incremental``).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg
from psycopg import conninfo, sql

from cdc.crashpoints import crash_point
from cdc.log import Log, Position, Producer, Record, StartAt

from .events import CommitInfo, TableShape, complete, read_event
from .lsn import format_lsn
from .pgoutput import Column, Relation
from .replication import SESSION_OPTIONS
from .shapes import ShapeRegistry
from .slot import split_table
from .snapshot_progress import SnapshotProgress

log = logging.getLogger(__name__)

BATCH_ROWS = 5_000


def snapshot_topic(prefix: str) -> str:
    """Where completed snapshots are recorded."""
    return f"{prefix}._snapshots"


def snapshot_state(event_log: Log, prefix: str, slot: str) -> str | None:
    """What the log says of ``slot``'s initial snapshot: ``started``, ``completed``, or
    None (never taken by this service: e.g. a slot created by hand)."""
    topic = snapshot_topic(prefix)
    if topic not in event_log.admin().topics():
        return None
    consumer = event_log.consumer(f"{prefix}-capture-snapshots", topics=[topic],
                                  start=StartAt.earliest())
    state: str | None = None
    try:
        while batch := consumer.poll(1000, timeout=0.5):
            for message in batch:
                record = orjson.loads(message.value)
                if record.get("slot") == slot and "kind" not in record:
                    state = str(record.get("state", "completed"))
    finally:
        consumer.close()
    return state


def mark_started(producer: Producer, prefix: str, slot: str, consistent_point: int) -> None:
    """Record that an initial snapshot of a slot this service created has begun."""
    value = orjson.dumps({"slot": slot, "state": "started",
                          "consistent_point": format_lsn(consistent_point)})
    producer.append([Record(snapshot_topic(prefix), orjson.dumps(slot), value)])


def published_tables(conn: psycopg.Connection[Any], publication: str,
                     configured: tuple[str, ...]) -> list[tuple[str, str]]:
    """The tables to read: the configured ones, or every table of the publication."""
    if configured:
        return [split_table(t) for t in configured]
    rows = conn.execute("SELECT schemaname, tablename FROM pg_publication_tables "
                        "WHERE pubname = %s ORDER BY 1, 2", (publication,)).fetchall()
    return [(r[0], r[1]) for r in rows]


def catalog_relation(conn: psycopg.Connection[Any], schema: str, table: str) -> Relation:
    """A Relation like the one pgoutput would send, read from the catalog."""
    row = conn.execute(
        "SELECT c.oid, c.relreplident FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        (schema, table)).fetchone()
    if row is None:
        raise LookupError(f"table {schema}.{table} not found")
    oid, identity = int(row[0]), str(row[1])
    columns = conn.execute(  # the identity index: the primary key, or the one chosen
        "SELECT a.attname, a.atttypid, a.atttypmod, coalesce(a.attnum = ANY(i.indkey), false)"
        " FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid"
        " AND CASE %s WHEN 'i' THEN i.indisreplident ELSE i.indisprimary END"
        " WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped"
        " AND a.attgenerated = '' ORDER BY a.attnum", (identity, oid)).fetchall()

    def flagged(in_index: bool) -> bool:  # as pgoutput flags replica identity
        return identity == "f" or (identity in ("d", "i") and in_index)

    return Relation(oid, schema, table, identity,
                    tuple(Column(flagged(bool(key)), name, int(typ), int(mod))
                          for name, typ, mod, key in columns))


def snapshot_connection(dsn: str) -> psycopg.Connection[Any]:
    """An autocommit connection with the session settings the codecs read (UTF-8, ISO
    dates, postgres intervals), like the replication connection's."""
    options = conninfo.conninfo_to_dict(dsn).get("options") or ""
    return psycopg.connect(conninfo.make_conninfo(
        dsn, client_encoding="UTF8", options=f"{options} {SESSION_OPTIONS}".strip()),
        autocommit=True)


def _copy_field(text: str) -> str | None:
    if text == "\\N":
        return None
    return _COPY_ESCAPE.sub(lambda m: _COPY_ESCAPES.get(m.group(1), m.group(1)), text)


_COPY_ESCAPE = re.compile(r"\\(.)", re.S)
_COPY_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def copy_batches(conn: psycopg.Connection[Any], query: sql.Composable,
                 batch_rows: int = BATCH_ROWS) -> Iterator[list[list[str | None]]]:
    """The rows of ``COPY (query) TO STDOUT`` (text format) as lists of text values
    (None for NULL), ``batch_rows`` at a time: memory stays bounded however big the table."""
    with conn.cursor().copy(sql.SQL("COPY ({}) TO STDOUT").format(query)) as copy:
        rest = b""
        batch: list[list[str | None]] = []
        for block in copy:
            lines = (rest + bytes(block)).split(b"\n")
            rest = lines.pop()
            for line in lines:
                text = line.decode("utf-8", "surrogateescape")
                if "\\" in text:
                    batch.append([_copy_field(f) for f in text.split("\t")])
                else:
                    batch.append(text.split("\t"))  # type: ignore[arg-type]
            while len(batch) >= batch_rows:
                yield batch[:batch_rows]
                del batch[:batch_rows]
        if batch:
            yield batch


def _estimated_rows(conn: psycopg.Connection[Any], oid: int) -> int | None:
    row = conn.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s",
                       (oid,)).fetchone()
    return int(row[0]) if row is not None and int(row[0]) > 0 else None


class _SnapshotWriter:
    """Appends the rows of all tables read in parallel, numbering them ``(point, seq)``."""

    def __init__(self, producer: Producer, commit: CommitInfo) -> None:
        self.producer = producer
        self.commit = commit
        self.seq = 0
        self._lock = threading.Lock()

    def append(self, shape: TableShape, rows: list[list[str | None]]) -> None:
        lsn = self.commit.commit_lsn
        events = [read_event(shape, values, lsn) for values in rows]
        with self._lock:
            seq = self.seq
            self.producer.append([Record(e.topic, e.key, complete(e, self.commit, seq + i),
                                         Position(lsn, seq + i))
                                  for i, e in enumerate(events)])
            self.seq = seq + len(events)
            crash_point("snapshot_batch")


def _read_table(dsn: str, snapshot_name: str, shape: TableShape, writer: _SnapshotWriter,
                progress: SnapshotProgress) -> None:
    table = f"{shape.schema}.{shape.table}"
    query = sql.SQL("SELECT {} FROM {}").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in shape.columns),
        sql.Identifier(shape.schema, shape.table))
    with snapshot_connection(dsn) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_name)))
        for batch in copy_batches(conn, query):
            writer.append(shape, batch)
            progress.advance(table, len(batch))
        conn.execute("ROLLBACK")
    progress.finish(table)


def run_initial_snapshot(dsn: str, snapshot_name: str, consistent_point: int, *,
                         shapes: ShapeRegistry, producer: Producer,
                         tables: list[tuple[str, str]], database: str,
                         workers: int | None = None,
                         progress: SnapshotProgress | None = None) -> int:
    """Read ``tables`` inside the exported snapshot and append them; returns the rows.

    Each table is read with ``COPY … TO STDOUT`` in batches; up to ``workers`` tables at
    once (default: one per CPU), each on its own connection importing the same snapshot.
    """
    commit = CommitInfo(orjson.dumps(database), consistent_point, 0,
                        datetime.now(UTC).isoformat(timespec="microseconds")
                        .replace("+00:00", "Z"), snapshot=True)
    writer = _SnapshotWriter(producer, commit)
    table_shapes: list[TableShape] = []
    display = progress or SnapshotProgress()
    try:
        with snapshot_connection(dsn) as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}")
                         .format(sql.Literal(snapshot_name)))
            for schema, table in tables:
                relation = catalog_relation(conn, schema, table)
                schema_record = shapes.learn(relation)
                if schema_record is not None:
                    producer.append([schema_record])
                table_shapes.append(shapes.get(relation.oid))
                display.start(f"{schema}.{table}", _estimated_rows(conn, relation.oid))
            conn.execute("ROLLBACK")
        count = max(1, min(len(table_shapes), workers or os.cpu_count() or 1))
        log.info("initial snapshot of %d tables, %d at a time", len(table_shapes), count,
                 extra={"lsn": format_lsn(consistent_point)})
        if count == 1:
            for shape in table_shapes:
                _read_table(dsn, snapshot_name, shape, writer, display)
        else:
            with ThreadPoolExecutor(count, thread_name_prefix="snapshot") as pool:
                for done in [pool.submit(_read_table, dsn, snapshot_name, shape, writer,
                                         display) for shape in table_shapes]:
                    done.result()
    finally:
        if progress is None:
            display.close()
    return writer.seq


def mark_completed(producer: Producer, prefix: str, slot: str, consistent_point: int,
                   tables: list[tuple[str, str]], rows: int) -> None:
    """Record that the initial snapshot of ``slot`` is complete and durable."""
    value = orjson.dumps({"slot": slot, "state": "completed",
                          "consistent_point": format_lsn(consistent_point),
                          "tables": [f"{s}.{t}" for s, t in tables], "rows": rows,
                          "completed_at": datetime.now(UTC).isoformat()})
    producer.append([Record(snapshot_topic(prefix), orjson.dumps(slot), value)])
