"""The initial snapshot: the published tables as ``r`` events, consistent with the stream.

When the capture creates its slot it asks for an exported snapshot; while the slot's
replication connection stays open, another connection reads every table inside that
snapshot (``REPEATABLE READ``, ``SET TRANSACTION SNAPSHOT``), so the rows are exactly the
state at the slot's consistent point: streaming then starts there, with no gap and no
overlap. Values are read as text and go through the same codecs as streamed rows.
Snapshot events carry the position ``(consistent_point, seq)``, below every streamed
transaction's. Records on ``<prefix>._snapshots`` mark the snapshot started and completed; a slot
this service created whose snapshot never completed was interrupted and is re-created
(its rows are read again); a slot created by someone else is never dropped.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg
from psycopg import sql

from cdc.crashpoints import crash_point
from cdc.log import Log, Position, Producer, Record, StartAt

from .events import CommitInfo, complete, insert_events
from .lsn import format_lsn
from .pgoutput import Column, Relation
from .shapes import ShapeRegistry
from .slot import split_table

log = logging.getLogger(__name__)

FETCH_ROWS = 5_000


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
                if record.get("slot") == slot:
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
    columns = conn.execute(
        "SELECT a.attname, a.atttypid, a.atttypmod, coalesce(a.attnum = ANY(i.indkey), false)"
        " FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid"
        " AND i.indisprimary WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped"
        " AND a.attgenerated = '' ORDER BY a.attnum", (oid,)).fetchall()
    def flagged(is_primary_key: bool) -> bool:  # as pgoutput flags replica identity
        return identity == "f" or (identity == "d" and is_primary_key)

    return Relation(oid, schema, table, identity,
                    tuple(Column(flagged(bool(key)), name, int(typ), int(mod))
                          for name, typ, mod, key in columns))


def run_initial_snapshot(dsn: str, snapshot_name: str, consistent_point: int, *,
                         shapes: ShapeRegistry, producer: Producer,
                         tables: list[tuple[str, str]], database: str) -> int:
    """Read ``tables`` inside the exported snapshot and append them; returns the rows."""
    commit = CommitInfo(orjson.dumps(database), consistent_point, 0,
                        datetime.now(UTC).isoformat(timespec="microseconds")
                        .replace("+00:00", "Z"), snapshot=True)
    seq = 0
    with psycopg.connect(dsn) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_name)))
        for schema, table in tables:
            started, rows = time.monotonic(), 0
            relation = catalog_relation(conn, schema, table)
            schema_record = shapes.learn(relation)
            if schema_record is not None:
                producer.append([schema_record])
            shape = shapes.get(relation.oid)
            query = sql.SQL("SELECT {} FROM {}").format(
                sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c.name))
                                   for c in relation.columns),
                sql.Identifier(schema, table))
            with conn.cursor(name=f"snapshot_{relation.oid}") as cursor:
                cursor.execute(query)
                while batch := cursor.fetchmany(FETCH_ROWS):
                    records = []
                    for values in batch:
                        for event in insert_events(shape, values, consistent_point, "r"):
                            records.append(Record(event.topic, event.key,
                                                  complete(event, commit, seq),
                                                  Position(consistent_point, seq)))
                            seq += 1
                    producer.append(records)
                    crash_point("snapshot_batch")
                    rows += len(batch)
            log.info("snapshot of %s.%s: %d rows in %.1f s", schema, table, rows,
                     time.monotonic() - started, extra={"lsn": format_lsn(consistent_point)})
        conn.rollback()
    return seq


def mark_completed(producer: Producer, prefix: str, slot: str, consistent_point: int,
                   tables: list[tuple[str, str]], rows: int) -> None:
    """Record that the initial snapshot of ``slot`` is complete and durable."""
    value = orjson.dumps({"slot": slot, "state": "completed",
                          "consistent_point": format_lsn(consistent_point),
                          "tables": [f"{s}.{t}" for s, t in tables], "rows": rows,
                          "completed_at": datetime.now(UTC).isoformat()})
    producer.append([Record(snapshot_topic(prefix), orjson.dumps(slot), value)])
