"""Turning decoded pgoutput messages into log records, one transaction at a time.

``TransactionAssembler`` is sans-IO: it takes each decoded message with the WAL position
it arrived at and fills ``ready`` with complete records, numbering each event of a
transaction ``(commit_lsn, seq)``. ``ack_lsn`` is the end LSN of the last transaction
whose every record is in ``ready`` (or was taken from it): what may be acknowledged to
PostgreSQL once those records are durable.

A prepared transaction (two-phase decoding, ``BeginPrepare`` … ``Prepare`` or a streamed
one ended by ``StreamPrepare``) is spooled under its xid like a streamed transaction and
becomes records only at ``CommitPrepared``, numbered at the commit's LSN with its time;
``RollbackPrepared`` drops it. Until its outcome is known ``ack_lsn`` stays at or below
its PREPARE's LSN: PostgreSQL does not send a prepared transaction's changes again once
the client confirmed past its PREPARE, so after a restart it must still be resent.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import orjson

from cdc.log import Position, Record

from .. import pgoutput as pg
from ..codecs import pg_micros_to_iso
from ..events import (
    CommitInfo,
    PendingEvent,
    complete,
    delete_events,
    insert_events,
    message_event,
    truncate_event,
    update_events,
)
from ..lsn import message_commit_lsn
from ..schema.ddl import DDL_PREFIX
from ..schema.ddl_alters import altered_tables, alters_a_type
from ..schema.ddl_drops import dropped_tables
from ..schema.rewrites import Signature, signature_of
from ..schema.shapes import ShapeRegistry
from .spool import StreamSpool

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _StreamDrain:
    commit: CommitInfo
    events: Iterator[PendingEvent]
    end_lsn: int
    seq: int = 0
    handed_out: int = -1
    hold: int | None = None  # a prepared transaction's PREPARE LSN: no ack past it yet


@dataclass(slots=True)
class _OpenTransaction:
    commit: CommitInfo
    seq: int = 0


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A prepared transaction whose COMMIT or ROLLBACK PREPARED has not come yet."""

    gid: str
    prepare_lsn: int


class RowsRewritten(NamedTuple):
    """A schema change that altered rows nobody wrote since (``schema.rewrites``)."""

    table: str  # schema.table
    reason: str
    lsn: int  # the commit LSN of its transaction (a Relation message comes at 0/0)
    signature: Signature | None  # the columns now (None: the same columns, their types
    # altered: a re-read under way for them is started again)


class TableAltered(NamedTuple):
    """A table an ``ALTER TABLE`` DDL message names (``schema.ddl_alters``): its rows may
    have changed; the loop compares its columns in the catalog with the log's."""

    identity: str  # as PostgreSQL quotes it
    lsn: int  # the commit LSN of its transaction


@dataclass(slots=True)
class TransactionAssembler:
    """Decoded messages in, complete records out (see the module docstring)."""

    shapes: ShapeRegistry
    spool: StreamSpool
    database: str
    messages_topic: str
    message_prefixes: frozenset[str]
    ready: list[Record] = field(default_factory=list)
    topic_of_prefix: dict[str, str] = field(default_factory=dict)  # message prefix → topic
    rewritten: list[RowsRewritten] = field(default_factory=list)  # taken by the loop
    altered: list[TableAltered] = field(default_factory=list)  # taken by the loop
    _ack: int = 0
    _open: _OpenTransaction | None = None
    _stream_xid: int | None = None
    _db_json: bytes = b"null"
    _draining: _StreamDrain | None = None
    _preparing: int | None = None  # the xid between Begin Prepare and Prepare
    _prepared: dict[int, _Prepared] = field(default_factory=dict)  # xid → outcome pending

    def __post_init__(self) -> None:
        self._db_json = orjson.dumps(self.database)

    @property
    def ack_lsn(self) -> int:
        """What may be acknowledged once ``ready`` is durable: never past the PREPARE of
        a prepared transaction whose outcome has not come (see the module docstring)."""
        drain = self._draining
        if not self._prepared and (drain is None or drain.hold is None):
            return self._ack
        holds = [p.prepare_lsn for p in self._prepared.values()]
        if drain is not None and drain.hold is not None:  # till its last record is out
            holds.append(drain.hold)
        return min(self._ack, *holds)

    @ack_lsn.setter
    def ack_lsn(self, lsn: int) -> None:
        self._ack = lsn

    @property
    def idle(self) -> bool:
        """True between transactions with no streamed or prepared transaction open."""
        return (self._open is None and self._draining is None and not self._prepared
                and self.spool.open_transactions() == 0)

    @property
    def transaction(self) -> _OpenTransaction | None:
        """The open transaction (Begin seen, Commit not yet): its commit information and
        the ``seq`` its next record gets. None between transactions."""
        return self._open

    @property
    def stream_xid(self) -> int | None:
        """The top-level xid of the streamed transaction whose block is open, else None."""
        return self._stream_xid

    @property
    def stream_drain(self) -> _StreamDrain | None:
        """The committed streamed (or prepared) transaction being handed out, if any."""
        return self._draining

    @property
    def draining(self) -> bool:
        """True while a committed streamed transaction still has records to hand out."""
        return self._draining is not None

    def drain(self, limit: int) -> None:
        """Move up to ``limit`` records of a committed streamed transaction to ``ready``
        (memory stays bounded however large it was); at its end, advance ``ack_lsn``."""
        drain = self._draining
        if drain is None:
            return
        commit = drain.commit
        for event in itertools.islice(drain.events, limit):
            self.ready.append(Record(event.topic, event.key, complete(event, commit, drain.seq),
                                     Position(commit.commit_lsn, drain.seq), event.tombstone))
            drain.seq += 1
        if drain.seq == drain.handed_out:  # nothing came: the spool is exhausted
            self._draining = None
            self._ack = max(self._ack, drain.end_lsn)
        drain.handed_out = drain.seq

    def feed(self, message: pg.Message, wal_lsn: int) -> None:
        """Apply one decoded message that arrived at ``wal_lsn``."""
        match message:
            case pg.Insert(relation_oid=oid, new=new, xid=xid):
                self._emit(insert_events(self.shapes.get(oid), new, wal_lsn), xid, wal_lsn)
            case pg.Update(relation_oid=oid, old_kind=old_kind, old=old, new=new, xid=xid):
                self._emit(update_events(self.shapes.get(oid), old_kind, old, new, wal_lsn),
                           xid, wal_lsn)
            case pg.Delete(relation_oid=oid, old_kind=old_kind, old=old, xid=xid):
                self._emit(delete_events(self.shapes.get(oid), old_kind, old, wal_lsn), xid,
                           wal_lsn)
            case pg.Begin():
                self._open = _OpenTransaction(CommitInfo(
                    self._db_json, message.final_lsn, message.xid,
                    pg_micros_to_iso(message.commit_ts)))
            case pg.Commit():
                self._open = None
                self._ack = max(self._ack, message.end_lsn)
            case pg.Relation():
                rewrite = self.shapes.rows_rewritten(message)
                since = self._since(wal_lsn)
                schema_record, recreated = self.shapes.learn_relation(
                    message, since, self._open.commit.txid if self._open else None)
                if rewrite is not None:
                    self.rewritten.append(RowsRewritten(
                        f"{message.namespace}.{message.name}", rewrite, since,
                        signature_of(message)))
                if schema_record is not None:
                    self.ready.append(schema_record)
                if recreated:
                    self._recreated(message, wal_lsn)
            case pg.Truncate():
                self._emit([truncate_event(self.shapes.get(oid), message.cascade,
                                           message.restart_identity, wal_lsn)
                            for oid in message.relation_oids], message.xid)
            case pg.StreamStart():
                self._stream_xid = message.xid
            case pg.StreamStop():
                self._stream_xid = None
            case pg.StreamCommit():
                self._stream_commit(message)
            case pg.StreamAbort():
                self.spool.abort(message.xid, message.subxid)
            case pg.LogicalMessage():
                self._logical_message(message, wal_lsn)
            case pg.TypeMsg():
                self.shapes.reload_type(message.oid,
                                        self._open.commit.txid if self._open else None)
            case pg.BeginPrepare() | pg.Prepare() | pg.StreamPrepare() | pg.CommitPrepared() \
                    | pg.RollbackPrepared():
                self._two_phase(message)
            case pg.Origin():
                pass  # carries nothing to record

    def _two_phase(self, message: pg.Message) -> None:
        """The two-phase messages (protocol 3, a ``two_phase`` slot)."""
        if isinstance(message, pg.BeginPrepare):
            self._preparing = message.xid
            self._prepared[message.xid] = _Prepared(message.gid, message.prepare_lsn)
        elif isinstance(message, pg.Prepare):
            self._preparing = None
            self._prepared[message.xid] = _Prepared(message.gid, message.prepare_lsn)
        elif isinstance(message, pg.StreamPrepare):  # its stream blocks are spooled already
            self._prepared[message.xid] = _Prepared(message.gid, message.prepare_lsn)
        elif isinstance(message, pg.CommitPrepared):
            prepared = self._prepared.pop(message.xid, None)
            if prepared is None:
                log.warning("COMMIT PREPARED %r (xid %d) came without its PREPARE: the "
                            "transaction has no events", message.gid, message.xid)
            commit = CommitInfo(self._db_json, message.commit_lsn, message.xid,
                                pg_micros_to_iso(message.commit_ts))
            self._draining = _StreamDrain(commit, self.spool.commit(message.xid),
                                          message.end_lsn,
                                          hold=prepared.prepare_lsn if prepared else None)
        elif isinstance(message, pg.RollbackPrepared):
            self._prepared.pop(message.xid, None)
            self.spool.abort(message.xid, message.xid)
            self._ack = max(self._ack, message.rollback_end_lsn)

    def _since(self, wal_lsn: int) -> int:
        """The commit LSN from which a shape learnt now applies (``since_lsn``)."""
        return self._open.commit.commit_lsn if self._open else wal_lsn

    def _emit(self, events: list[PendingEvent], xid: int | None,
              wal_lsn: int | None = None) -> None:
        if wal_lsn is not None and self.shapes.has_rechecked:
            # a composite type changed since the shape was built (``recheck_shape``): its
            # new schema version is recorded before the first event that carries it, and
            # the rows nobody wrote since, whose values it changed, are read again
            since = self._since(wal_lsn)
            for rechecked in self.shapes.take_rechecked(since):
                self.ready.append(rechecked.record)
                self.rewritten.append(RowsRewritten(rechecked.table, rechecked.reason, since,
                                                    None))
        if xid is not None and self._stream_xid is not None:
            self.spool.add(self._stream_xid, xid, events)
            return
        if self._preparing is not None:  # held until COMMIT PREPARED
            self.spool.add(self._preparing, self._preparing, events)
            return
        transaction = self._open
        assert transaction is not None, "a row change outside a transaction"
        commit = transaction.commit
        for event in events:
            self.ready.append(Record(event.topic, event.key,
                                     complete(event, commit, transaction.seq),
                                     Position(commit.commit_lsn, transaction.seq),
                                     event.tombstone))
            transaction.seq += 1

    def _recreated(self, relation: pg.Relation, wal_lsn: int) -> None:
        """The table was dropped and created again: a truncate event before the new
        relation's first event, so every reader starts the new table empty."""
        in_stream = relation.xid is not None and self._stream_xid is not None
        inside = self._open is not None or self._preparing is not None or in_stream
        if not inside:  # pgoutput sends it inside a transaction
            log.warning("%s.%s was re-created, but its Relation came outside a transaction: "
                        "no truncate event written", relation.namespace, relation.name)
            return
        event = truncate_event(self.shapes.get(relation.oid), False, False, wal_lsn,
                               recreated=True)
        self._emit([event], relation.xid)

    def _dropped(self, ddl_content: bytes, wal_lsn: int) -> list[PendingEvent]:
        """A truncate event for each captured table a DDL message says was dropped
        (``ddl_drops``); tables the capture never recorded yield nothing."""
        events = []
        for table in dropped_tables(ddl_content):
            shape = self.shapes.dropped(table.oid, table.schema, table.name)
            if shape is not None:
                log.info("%s.%s was dropped: its topic gets a truncate event", shape.schema,
                         shape.table)
                events.append(truncate_event(shape, False, False, wal_lsn, dropped=True))
        return events

    def _stream_commit(self, message: pg.StreamCommit) -> None:
        commit = CommitInfo(self._db_json, message.commit_lsn, message.xid,
                            pg_micros_to_iso(message.commit_ts))
        self._draining = _StreamDrain(commit, self.spool.commit(message.xid), message.end_lsn)
        self._stream_xid = None

    def _logical_message(self, message: pg.LogicalMessage, wal_lsn: int) -> None:
        topic = self.topic_of_prefix.get(message.prefix)  # e.g. DDL text → <prefix>._ddl
        if topic is None and message.prefix not in self.message_prefixes:
            return
        event = message_event(topic or self.messages_topic, message.prefix, message.content,
                              message.transactional, wal_lsn)
        in_stream = message.xid is not None and self._stream_xid is not None
        if message.transactional and (self._open is not None or in_stream
                                      or self._preparing is not None):
            self._emit([event], message.xid)  # spooled with its streamed transaction
            if message.prefix == DDL_PREFIX:  # DROP TABLE: readers drop the rows too
                self._emit(self._dropped(message.content, wal_lsn), message.xid)
                if self._open is not None:  # committed: the catalog shows the change
                    at = self._open.commit.commit_lsn
                    self.altered += (TableAltered(identity, at)
                                     for identity in altered_tables(message.content))
                    if alters_a_type(message.content):  # its tables' new schema versions,
                        self.shapes.type_altered()  # and their rows read again, at once
                        self._emit([], message.xid, wal_lsn)
        else:
            at = message_commit_lsn(message.lsn)  # before a transaction committed after it
            commit = CommitInfo(self._db_json, at, 0, "")
            self.ready.append(Record(event.topic, event.key, complete(event, commit, 0),
                                     Position(at, 0)))
