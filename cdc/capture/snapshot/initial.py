"""The initial snapshot: the published tables as ``r`` events, consistent with the stream.

When the capture creates its slot it asks for an exported snapshot; while the slot's
replication connection stays open, a few worker connections read the tables inside that
snapshot (``REPEATABLE READ``, ``SET TRANSACTION SNAPSHOT``; ``snapshot_read``), so the
rows are exactly the state at the slot's consistent point: streaming then starts there,
with no gap and no overlap. Snapshot events carry the position ``(consistent_point,
seq)``, below every streamed transaction's.

Records on ``<prefix>._snapshots`` mark the snapshot ``started`` (with its tables) and
``completed`` (keyed by the slot, so they stay in order), and each batch of tables read
completely (``initial_tables``, matched to its snapshot by consistent point). After an
interruption the slot is kept: the tables already read stay read, the others are read by
incremental snapshots while streaming from the slot's position (``snapshot_resume``). The
capture never drops a slot unless PostgreSQL invalidated it (``--recreate-lost-slot``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg

from cdc.log import Producer, Record

from ..lsn import format_lsn
from ..pgoutput import Column, Relation
from ..schema.shapes import ShapeRegistry
from ..source import session
from ..source.publication import selected_tables
from .progress import SnapshotProgress
from .read import read_tables

log = logging.getLogger(__name__)


def snapshot_topic(prefix: str) -> str:
    """Where completed snapshots are recorded."""
    return f"{prefix}._snapshots"


def mark_started(producer: Producer, prefix: str, slot: str, consistent_point: int,
                 tables: list[tuple[str, str]] | None = None) -> None:
    """Record that an initial snapshot of a slot this service created has begun (with
    the tables it is to read)."""
    value: dict[str, Any] = {"slot": slot, "state": "started",
                             "consistent_point": format_lsn(consistent_point)}
    if tables is not None:
        value["tables"] = [f"{s}.{t}" for s, t in tables]
    producer.append([Record(snapshot_topic(prefix), orjson.dumps(slot), orjson.dumps(value))])


def mark_tables_read(producer: Producer, prefix: str, slot: str, consistent_point: int,
                     tables: list[str]) -> None:
    """Record that the initial snapshot taken at ``consistent_point`` read ``tables``
    completely (their rows durable): after an interruption they stay read. Each record
    has its own key, so a compacted topic keeps them all."""
    point = format_lsn(consistent_point)
    value = orjson.dumps({"slot": slot, "kind": "initial_tables", "consistent_point": point,
                          "tables": tables})
    key = orjson.dumps(f"initial_tables:{slot}:{point}:{tables[0] if tables else ''}")
    producer.append([Record(snapshot_topic(prefix), key, value)])


def published_tables(conn: psycopg.Connection[Any], publication: str,
                     configured: tuple[str, ...]) -> list[tuple[str, str]]:
    """The tables to read: those ``configured`` selects (names or patterns, matched
    against the catalog), or every table of the publication."""
    if configured:
        return selected_tables(conn, configured)
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
    """An autocommit connection with the session settings the codecs read
    (``session.PINNED_SETTINGS``), like the replication connection's."""
    return session.connect(dsn)


def run_initial_snapshot(dsn: str, snapshot_name: str, consistent_point: int, *,
                         shapes: ShapeRegistry, producer: Producer,
                         tables: list[tuple[str, str]], database: str,
                         workers: int | None = None,
                         progress: SnapshotProgress | None = None,
                         range_bytes: int | None = None) -> int:
    """Read ``tables`` inside the exported snapshot and append them; returns the rows
    (``snapshot_read.read_tables`` tells what became of each table)."""
    return read_tables(dsn, snapshot_name, consistent_point, shapes=shapes,
                       producer=producer, tables=tables, database=database,
                       workers=workers, progress=progress, range_bytes=range_bytes).rows


def mark_completed(producer: Producer, prefix: str, slot: str, consistent_point: int,
                   tables: list[tuple[str, str]], rows: int,
                   streamed: list[str] | None = None) -> None:
    """Record that the initial snapshot of ``slot`` is complete and durable; ``streamed``:
    the tables left to incremental snapshots (requested before this record)."""
    value = orjson.dumps({"slot": slot, "state": "completed",
                          "consistent_point": format_lsn(consistent_point),
                          "tables": [f"{s}.{t}" for s, t in tables], "rows": rows,
                          "read_while_streaming": streamed or [],
                          "completed_at": datetime.now(UTC).isoformat()})
    producer.append([Record(snapshot_topic(prefix), orjson.dumps(slot), value)])
