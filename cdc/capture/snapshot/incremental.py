"""Incremental snapshots while streaming continues (the watermark method of DBLog).

The capture — the only writer of the table topics, and the one that sees the stream —
performs them. For each chunk of the table, in key order: write a low watermark
(``pg_logical_emit_message``), read the chunk inside a REPEATABLE READ snapshot, write a
high watermark. When the high watermark comes through the stream, the chunk's rows that
a streamed transaction invisible in the chunk's snapshot touched are dropped
(``watermarks``), and the rest are appended as ``r`` events at the high watermark's
position ``(lsn, seq)`` — after every change they include, before every change they do
not (``lsn`` from ``message_commit_lsn``: PostgreSQL reports the watermark at the LSN
where a transaction committed right after it may begin). Then the table's progress
(last key, chunks, rows) is appended to
``<prefix>._snapshots``; after a crash the snapshot resumes after the last recorded chunk.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg

from cdc.config.source import SchemaChangesConfig
from cdc.crashpoints import crash_point
from cdc.errors import SourceError
from cdc.log import Position, Producer, Record

from ..events import CommitInfo, TableShape, complete, insert_events, truncate_event
from ..lsn import format_lsn, message_commit_lsn, parse_lsn
from ..pgoutput import Begin, CommitPrepared, LogicalMessage, Message, Relation, StreamCommit
from ..schema.rewrites import Signature, signature_of
from ..schema.shapes import ShapeRegistry
from ..source import session
from ..source.ddl_race import outlast_ddl, raced_ddl
from ..source.publication import published_relations, tables_added_by_name
from ..source.slot import split_table
from .catalog import planned_rows, published_table
from .chunks import WHOLE_TABLE, ChunkKey, NoChunkKeyError, chunk_key, chunk_query
from .incremental_log import (
    MESSAGE_PREFIX,
    TableSnapshot,
    known_tables,
    table_states,
    tables_record,
)
from .watermarks import KeyTracker, SnapshotXids, surviving

log = logging.getLogger(__name__)

PROGRESS_LOG_EVERY_S = 10.0
DEFAULT_CHUNK_ROWS = 5000
# the size guard's EXPLAIN waits this long at most for the table's lock
ESTIMATE_LOCK_TIMEOUT = b"SET lock_timeout = '2s'"
RACE_RETRY_S = 0.2  # a chunk whose read raced DDL is read again after this …
RACE_RETRIES = 150  # … up to this many times in a row (30 s), then the snapshot fails


@dataclass(slots=True)
class _Chunk:
    """A chunk read and waiting for its high watermark in the stream."""

    token: str
    state: TableSnapshot
    relation: Relation
    key: ChunkKey
    snapshot: SnapshotXids
    rows: list[tuple[str | None, ...]]
    low_seen: bool = False


@dataclass(slots=True)
class IncrementalSnapshots:
    """The incremental snapshots of one capture session (see the module docstring)."""

    dsn: str
    prefix: str
    database: str
    producer: Producer
    shapes: ShapeRegistry
    publication: str
    new_tables: bool = True
    new_tables_check_s: float = 10.0  # look for tables new in the publication this often
    schema_changes: SchemaChangesConfig = field(default_factory=SchemaChangesConfig)
    refusal: str | None = None  # why none can be performed here (PostgreSQL 13): all fail
    known: dict[str, int] = field(default_factory=dict)  # table → relation oid
    states: dict[str, TableSnapshot] = field(default_factory=dict)
    _conn: psycopg.Connection[Any] | None = None
    _chunk: _Chunk | None = None
    _trackers: dict[str, KeyTracker] = field(default_factory=dict)  # topic → keys
    _xids: dict[int, int] = field(default_factory=dict)  # commit LSN → xid
    _stream_relations: dict[int, Relation] = field(default_factory=dict)
    _rereads: dict[str, Signature] = field(default_factory=dict)  # table → columns read for
    _retry_at: float = 0.0
    _races: int = 0  # chunk reads in a row that raced DDL
    _next_log: float = 0.0
    _next_table_check: float = 0.0

    @classmethod
    def from_log(cls, records: list[dict[str, Any]], **kwargs: Any) -> IncrementalSnapshots:
        """Resume the snapshots the log records as requested or running; the tables the
        log records as known (or, the first time, the publication's) are not new."""
        snapshots = cls(**kwargs)
        snapshots.states = {t: s for t, s in table_states(records).items() if s.active}
        for table in snapshots.states:
            snapshots._track(table)
        known = known_tables(records)
        if known is None:
            known = snapshots._published()
            snapshots.producer.append([tables_record(snapshots.prefix, known)])
        snapshots.known = known
        snapshots._next_table_check = time.monotonic() + snapshots.new_tables_check_s
        return snapshots

    def _published(self) -> dict[str, int]:
        with session.connect(self.dsn) as conn:
            return published_relations(conn, self.publication)

    def _added_explicitly(self) -> set[str]:
        with session.connect(self.dsn) as conn:
            return tables_added_by_name(conn, self.publication)

    def add_new_tables(self, tables: dict[str, int]) -> None:
        """Tables (name → oid) that joined the publication: remember them, and snapshot
        (when ``new_tables`` is on) those added to it by name — their earlier rows were
        never streamed — and renamed ones (their topic is new). A table created since,
        that joined through FOR ALL TABLES or its schema, has its whole history in the
        stream already."""
        fresh = {name: oid for name, oid in tables.items()  # new, or dropped and re-created
                 if self.known.get(name) != oid}
        if not fresh:
            return
        renamed = {oid: name for name, oid in self.known.items()}
        self.known.update(fresh)
        self.producer.append([tables_record(self.prefix, self.known)])
        named = self._added_explicitly() if self.new_tables else set()
        for table, oid in sorted(fresh.items()):
            before = renamed.get(oid)
            log.info("table %s joined publication %s%s", table, self.publication,
                     f" (renamed from {before})" if before else "")
            if self.new_tables and (table in named or before is not None):
                self.request(table, None, DEFAULT_CHUNK_ROWS, 0)

    def table_altered(self, identity: str, lsn: int) -> None:
        """An ``ALTER TABLE`` DDL message at ``lsn`` named the table ``identity`` (as
        PostgreSQL quotes it): when its columns in the catalog now differ from the log's
        schema version in a way that changed rows (``schema.rewrites``), read it again at
        once rather than at its next row change."""
        with session.connect(self.dsn) as conn:
            relation = outlast_ddl(lambda: self._relation_now(conn, identity),
                                   what=f"reading the columns of {identity}")
        if relation is None:  # dropped since, or not published: nothing to compare
            return
        reason = self.shapes.rows_rewritten(relation)
        if reason is not None:
            self.rows_rewritten(f"{relation.namespace}.{relation.name}", reason, lsn,
                                signature_of(relation))

    def _relation_now(self, conn: psycopg.Connection[Any], identity: str) -> Relation | None:
        """The relation pgoutput would send for ``identity`` now; None when it is gone,
        not published, or in a schema this role may not look into (not captured)."""
        try:
            row = conn.execute("SELECT n.nspname, c.relname FROM pg_class c JOIN "
                               "pg_namespace n ON n.oid = c.relnamespace "
                               "WHERE c.oid = to_regclass(%s)", (identity,)).fetchone()
        except psycopg.errors.InsufficientPrivilege:
            return None
        if row is None:
            return None
        try:
            return published_table(conn, row[0], row[1], self.publication).relation
        except LookupError:
            return None

    def rows_rewritten(self, table: str, reason: str, lsn: int,
                       signature: Signature | None = None) -> None:
        """A schema change at ``lsn`` altered rows of ``table`` that nobody wrote since
        (``schema.rewrites``): read the table again, unless ``source.schema_changes`` says
        to ignore it or to wait for ``cdc snapshot`` above a size. ``signature``: the
        columns after the change; a re-read of the table already under way for them (the
        DDL message came first, then the Relation message) is not started over."""
        if signature is not None and table in self.states \
                and self._rereads.get(table) == signature:
            log.debug("%s: already being read again after this schema change", table)
            return
        schema, name = split_table(table)
        policy = self.schema_changes
        if policy.action_for(schema, name) == "ignore":
            log.warning("%s: a schema change %s; source.schema_changes ignores it, so rows "
                        "not written since keep their old values downstream", table, reason,
                        extra={"lsn": format_lsn(lsn)})
            return
        limit = policy.confirm_above_rows
        if limit is not None:
            estimate = self._estimated_rows(schema, name)
            if estimate is None or estimate > limit:  # unknown: the guard holds
                size = "an unknown number of" if estimate is None else f"about {estimate}"
                log.warning("%s: a schema change %s; the table holds %s rows, not known to "
                            "be within source.schema_changes.confirm_above_rows (%d): run "
                            "`cdc snapshot -c <pipeline.yaml> --table %s` to read it again "
                            "(until then rows not written since keep their old values "
                            "downstream)", table, reason, size, limit, table,
                            extra={"lsn": format_lsn(lsn)})
                return
        if not self.request(table, None, DEFAULT_CHUNK_ROWS, lsn):
            return  # a replay: the re-read it asks for is under way or done
        log.info("%s: a schema change %s: reading the table again", table, reason,
                 extra={"lsn": format_lsn(lsn)})
        if signature is not None:
            self._rereads[table] = signature

    def _estimated_rows(self, schema: str, table: str) -> int | None:
        """The planner's estimate (0: dropped since); None when it cannot be had soon:
        the table is locked (EXPLAIN waits for a share lock, here at most
        ``ESTIMATE_LOCK_TIMEOUT``, never behind a long migration) or not readable."""
        with session.connect(self.dsn) as conn:
            conn.execute(ESTIMATE_LOCK_TIMEOUT)
            try:
                rows = outlast_ddl(lambda: planned_rows(conn, schema, table),
                                   what=f"estimating the rows of {schema}.{table}")
            except (psycopg.errors.LockNotAvailable,
                    psycopg.errors.InsufficientPrivilege) as exc:
                log.warning("%s.%s: cannot estimate its rows (%s)", schema, table,
                            (exc.diag.message_primary or type(exc).__name__).strip())
                return None
        return rows or 0

    def request_all(self) -> None:
        """Snapshot every published table again (snapshot mode ``always``)."""
        for table in sorted(self._published()):
            self.request(table, None, DEFAULT_CHUNK_ROWS, 0)

    @property
    def active(self) -> bool:
        return bool(self.states)

    # -- the stream ---------------------------------------------------------------------
    def observe(self, message: Message) -> bool:
        """Note what the watermark method needs of a decoded message; True when it is
        for this class (``handle`` it after flushing what came before)."""
        kind = type(message)
        if kind is Begin:
            if self._trackers:
                assert isinstance(message, Begin)
                self._xids[message.final_lsn] = message.xid
            return False
        if kind is StreamCommit or kind is CommitPrepared:
            if self._trackers:
                assert isinstance(message, StreamCommit | CommitPrepared)
                self._xids[message.commit_lsn] = message.xid
            return False
        if kind is Relation:
            assert isinstance(message, Relation)
            self._stream_relations[message.oid] = message
            return f"{message.namespace}.{message.name}" not in self.known

        if kind is LogicalMessage:
            assert isinstance(message, LogicalMessage)
            return message.prefix == MESSAGE_PREFIX
        return False

    def observe_records(self, records: Sequence[Record]) -> None:
        """Streamed records about to be appended: remember which keys each transaction
        wrote in the tables being snapshotted."""
        if not self._trackers:
            return
        newest = 0
        for record in records:
            tracker = self._trackers.get(record.topic)
            if tracker is None:
                continue
            commit_lsn = record.position.commit_lsn
            xid = self._xids.get(commit_lsn)
            if xid is not None:
                tracker.add(xid, record.key)
                newest = max(newest, commit_lsn)
        for lsn in [lsn for lsn in self._xids if lsn < newest]:  # transactions done
            del self._xids[lsn]

    def handle(self, message: Message) -> None:
        """A message ``observe`` claimed: a ``distributary.snapshot`` message (a request, a
        cancellation, a watermark) or the Relation of a table not seen before."""
        if isinstance(message, Relation):
            self.add_new_tables({f"{message.namespace}.{message.name}": message.oid})
            return
        assert isinstance(message, LogicalMessage)
        try:
            content = orjson.loads(message.content)
            action = content["action"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            log.warning("ignoring a malformed %s message at %s", MESSAGE_PREFIX,
                        format_lsn(message.lsn))
            return
        if action == "snapshot":
            self.request(str(content["table"]), content.get("where"),
                         int(content.get("chunk") or DEFAULT_CHUNK_ROWS), message.lsn)
        elif action == "cancel":
            self.cancel(str(content["table"]), message.lsn)
        elif action in ("low", "high"):
            self._watermark(action, str(content.get("token")), message.lsn)

    # -- requests -----------------------------------------------------------------------
    def request(self, table: str, where: str | None, chunk_size: int, lsn: int) -> bool:
        """Start (or restart) a snapshot of ``table``; a replayed request is ignored
        (False)."""
        known = self.states.get(table)
        if known is not None and parse_lsn(known.request_lsn) >= lsn > 0:
            return False
        self._rereads.pop(table, None)  # whatever it read again for, it starts over
        state = TableSnapshot(table, "requested", format_lsn(lsn), max(1, chunk_size), where)
        if self._chunk is not None and self._chunk.state.table == table:
            self._chunk = None
        self._record(state)
        log.info("incremental snapshot of %s requested (chunks of %d rows)", table,
                 state.chunk_size, extra={"lsn": state.request_lsn})
        return True

    def cancel(self, table: str, lsn: int) -> None:
        """Stop ``table``'s snapshot if one requested before ``lsn`` is active."""
        known = self.states.get(table)
        if known is None or not known.active or parse_lsn(known.request_lsn) > lsn:
            return
        if self._chunk is not None and self._chunk.state.table == table:
            self._chunk = None
        self._record(known.moved(state="cancelled", reason="cancelled by cdc snapshot --cancel"))
        log.info("incremental snapshot of %s cancelled", table)

    def _record(self, state: TableSnapshot) -> None:
        self.producer.append([state.record(self.prefix)])
        if state.active:
            self.states[state.table] = state
            self._track(state.table)
        else:
            self.states.pop(state.table, None)
            self._trackers.pop(self._topic(state.table), None)
            self._rereads.pop(state.table, None)

    def _track(self, table: str) -> None:
        self._trackers.setdefault(self._topic(table), KeyTracker())

    def _topic(self, table: str) -> str:
        schema, name = split_table(table)
        return self.shapes.topics.topic_for(schema, name)

    # -- chunks -------------------------------------------------------------------------
    def tick(self) -> None:
        """Read the next chunk when none is waiting for its high watermark; look for
        tables new in the publication now and then."""
        if self.new_tables and time.monotonic() >= self._next_table_check:
            self._next_table_check = time.monotonic() + self.new_tables_check_s
            self.add_new_tables(self._published())
        if self.refusal is not None and self.states:
            self._refuse_all(self.refusal)
        if not self.states and self._chunk is None:
            self._close()  # nothing left to read: no idle session held on the source
            return
        if self._chunk is not None or time.monotonic() < self._retry_at:
            return
        state = min(self.states.values(), key=lambda s: parse_lsn(s.request_lsn))
        try:
            self._read_chunk(state)
        except LookupError:  # dropped since it was requested: nothing left to read
            self._close()
            log.warning("incremental snapshot of %s stopped: the table no longer exists",
                        state.table)
            self._record(state.moved(state="failed", reason="the table was dropped"))
        except psycopg.Error as exc:
            self._races += 1
            if not raced_ddl(exc) or self._races > RACE_RETRIES:
                self._races = 0
                self._chunk_failed(state, exc)
                return
            self._close()  # DDL on the table meanwhile: read the chunk again shortly
            self._retry_at = time.monotonic() + RACE_RETRY_S
            log.info("incremental snapshot of %s: reading a chunk raced DDL (%s); reading "
                     "it again", state.table, str(exc).strip())
        except SourceError as exc:
            log.error("incremental snapshot of %s failed: %s", state.table, exc)
            self._record(state.moved(state="failed", reason=str(exc)))
        else:
            self._races = 0

    def _chunk_failed(self, state: TableSnapshot, exc: psycopg.Error) -> None:
        """A chunk's query failed (e.g. a bad --where: the operator must fix it); a lost
        connection ends the session instead."""
        if isinstance(exc, psycopg.OperationalError):
            raise exc
        reason = f"{type(exc).__name__}: {str(exc).strip()}"
        log.error("incremental snapshot of %s failed: %s", state.table, reason)
        self._close()
        self._record(state.moved(state="failed", reason=reason))

    def _refuse_all(self, reason: str) -> None:
        """Record every active snapshot as failed (never read: its watermarks would not
        come back through the stream), each with ``reason``."""
        for state in sorted(self.states.values(), key=lambda s: s.table):
            log.error("incremental snapshot of %s failed (the table's existing rows are "
                      "not in the log): %s", state.table, reason)
            self._record(state.moved(state="failed", reason=reason))

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            from .initial import snapshot_connection
            self._conn = snapshot_connection(self.dsn)
        return self._conn

    def _emit(self, conn: psycopg.Connection[Any], content: dict[str, Any]) -> None:
        conn.execute("SELECT pg_logical_emit_message(false, %s, %s)",
                     (MESSAGE_PREFIX, orjson.dumps(content).decode()))

    def _read_chunk(self, state: TableSnapshot) -> None:
        conn = self._connection()
        schema, table = split_table(state.table)
        token = uuid.uuid4().hex
        self._emit(conn, {"action": "low", "token": token, "table": state.table})
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            row = conn.execute("SELECT pg_current_snapshot()::text").fetchone()
            assert row is not None
            snapshot = SnapshotXids.parse(str(row[0]))
            published = published_table(conn, schema, table, self.publication)
            relation = published.relation
            try:
                key = chunk_key(conn, schema, table)
            except NoChunkKeyError:
                if parse_lsn(state.request_lsn) > 0:
                    raise  # an operator's request (cdc snapshot): refused, with the fix
                # the capture's own (an interrupted initial snapshot, a new table)
                log.warning("%s has no key to read it in chunks by: it is read in one "
                            "chunk", state.table)
                key = WHOLE_TABLE
            if not set(key.names) <= {c.name for c in relation.columns}:
                log.warning("%s: the publication's column list leaves out its key %s: "
                            "it is read in one chunk", state.table, ", ".join(key.names))
                key = WHOLE_TABLE
            query, params = chunk_query(schema, table, tuple(c.name for c in relation.columns),
                                        key, tuple(state.last_key) if state.last_key else None,
                                        state.where, state.chunk_size, published.row_filter)
            rows = conn.execute(query, params).fetchall()
        finally:
            conn.execute("ROLLBACK")
        self._emit(conn, {"action": "high", "token": token, "table": state.table})
        self._chunk = _Chunk(token, state, relation, key, snapshot, rows)

    def _watermark(self, action: str, token: str, lsn: int) -> None:
        chunk = self._chunk
        if chunk is None or chunk.token != token:
            return  # a previous session's chunk: read again from the recorded progress
        if action == "low":
            chunk.low_seen = True
            return
        self._chunk = None
        shape, schema_record, recreated = self._shape_for(chunk)
        if shape is None:
            self._retry_at = time.monotonic() + 1.0
            return
        dropped = self._trackers[shape.topic].superseded(chunk.snapshot)
        lsn = message_commit_lsn(lsn)  # before a transaction committed right after it
        events = [insert_events(shape, values, lsn, "r")[0] for values in chunk.rows]
        keep = surviving([e.key for e in events], dropped)
        commit = CommitInfo(orjson.dumps(self.database), lsn, 0,
                            datetime.now(UTC).isoformat(timespec="microseconds")
                            .replace("+00:00", "Z"), snapshot=True)
        records = [Record(events[i].topic, events[i].key, complete(events[i], commit, seq),
                          Position(lsn, seq)) for seq, i in enumerate(keep, int(recreated))]
        if recreated:  # dropped and created again: its topic starts empty
            event = truncate_event(shape, False, False, lsn, recreated=True)
            records.insert(0, Record(event.topic, event.key, complete(event, commit, 0),
                                     Position(lsn, 0)))
        # the schema records first: the relation's, then a composite type's altered since
        # (``recheck_shape``), its version higher
        rechecked = self.shapes.take_rechecked(lsn)
        records[0:0] = [*([schema_record] if schema_record is not None else []),
                        *(found.record for found in rechecked)]
        if records:
            self.producer.append(records)  # the rows durable before the progress
        crash_point("incremental_chunk")
        self._advance(chunk, len(keep), len(chunk.rows) - len(keep))
        for found in rechecked:  # rows read before the type changed: read them again
            self.rows_rewritten(found.table, found.reason, lsn)

    def _advance(self, chunk: _Chunk, emitted: int, dropped: int) -> None:
        state = chunk.state
        names = [c.name for c in chunk.relation.columns]
        last_key = state.last_key
        if chunk.rows:
            last = chunk.rows[-1]
            last_key = [str(last[names.index(c)]) for c in chunk.key.names]
        done = not chunk.key.columns or len(chunk.rows) < state.chunk_size
        moved = state.moved(state="completed" if done else "running", chunks=state.chunks + 1,
                            rows=state.rows + emitted, last_key=last_key)
        self._record(moved)
        if dropped:
            log.debug("chunk %d of %s: %d rows superseded by the stream", moved.chunks,
                      state.table, dropped)
        now = time.monotonic()
        if done or now >= self._next_log:
            self._next_log = now + PROGRESS_LOG_EVERY_S
            log.info("incremental snapshot of %s: %s, %d chunks, %d rows", state.table,
                     moved.state, moved.chunks, moved.rows)

    def _shape_for(self, chunk: _Chunk) -> tuple[TableShape | None, Record | None, bool]:
        """The shape to encode the chunk with: the stream's, when it has the columns the
        chunk was read with; else the catalog's, once the stream is past the change."""
        relation = chunk.relation
        streamed = self._stream_relations.get(relation.oid)
        if streamed is not None and _same_columns(streamed, relation):
            return self.shapes.get(relation.oid), None, False
        if streamed is not None:  # a column change is in flight: is it settled?
            schema, table = split_table(chunk.state.table)
            try:
                with session.connect(self.dsn) as conn:
                    now = outlast_ddl(
                        lambda: published_table(conn, schema, table, self.publication),
                        what=f"reading the columns of {chunk.state.table}").relation
            except LookupError:  # dropped: the next read of a chunk says so
                return None, None, False
            if not _same_columns(now, relation):
                log.info("%s changed while a chunk was read: reading it again",
                         chunk.state.table)
                return None, None, False
        record, recreated = self.shapes.learn_relation(relation)
        self._stream_relations[relation.oid] = relation
        return self.shapes.get(relation.oid), record, recreated

    def close(self) -> None:
        """Close the connection chunks are read with."""
        self._close()

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _same_columns(a: Relation, b: Relation) -> bool:
    return [(c.name, c.type_oid, c.type_modifier) for c in a.columns] == \
        [(c.name, c.type_oid, c.type_modifier) for c in b.columns]

