"""Streamed row changes through the native core (``native/src/pgoutput/``): the plain
messages of a batch as received become their log records (or spool frames) in one call,
byte for byte what the decoder, ``insert_events``/``update_events``/``delete_events`` and
``complete`` make of them.

``NativeChanges.feed_batch`` hands the native core the messages it can take: row changes
of an open transaction, or of a streamed one inside its stream block, of relations whose
codecs it all knows (``NativeTable``), and the Begins and Commits of normal transactions.
It stops at anything else — other messages, malformed ones, values Python keeps as text
(``unparsed``), an Update that changes the key — which the caller decodes, giving the
reference's records or errors.

``NativeChanges.drain`` reads a committed streamed (or prepared) transaction's spool file
into its records, one native call per chunk (``TransactionAssembler.drain``, one by one).
"""

from __future__ import annotations

from typing import TypeAlias

import orjson

from cdc.native import CORE

from ..events import TableShape
from ..pgoutput import Begin, Commit, PgOutputDecoder
from ..snapshot.native import NativeTable
from .spool import CommittedSpool
from .transactions import TransactionAssembler

SPOOL_CHUNK = 1 << 22  # bytes of spool frames read at once while draining

# what ``CORE.feed_batch`` takes of a relation: (plan, topic, source head, topic UTF-8,
# source names)
BatchTable: TypeAlias = tuple[CORE.SnapshotPlan, str, bytes, bytes, bytes]


class NativeChanges:
    """Row change messages of one replication session into ``assembler.ready``."""

    __slots__ = ("_batch_tables", "_db", "_draining", "_leftover", "_shapes_seen", "_tables",
                 "assembler", "commit_ts", "decoder", "received_lsn")

    def __init__(self, decoder: PgOutputDecoder, assembler: TransactionAssembler) -> None:
        self.decoder = decoder
        self.assembler = assembler
        self._db = orjson.dumps(assembler.database)
        # relation OID → its conversion, for the shape it was built from (None: Python's)
        self._tables: dict[int, tuple[TableShape, BatchTable | None]] = {}
        # the committed streamed transaction draining, its spool bytes read not consumed
        self._draining: CommittedSpool | None = None
        self._leftover = b""
        # the tables ``feed_batch`` converts while their shapes are current, kept natively
        # between calls (filled through ``_learn``, emptied by ``forget_tables`` and when
        # the registry's shapes changed: ``_shapes_seen``)
        self._batch_tables = CORE.BatchTables()
        self._shapes_seen = assembler.shapes.generation
        self.received_lsn = 0  # the end LSN of the last message ``feed_batch`` took
        self.commit_ts = 0  # the time of the last Commit ``feed_batch`` took (0: none)

    def feed_batch(self, raw: list[memoryview], start: int, *, begins: bool) -> int:
        """Take the messages of ``raw`` (CopyData payloads as received) from index
        ``start`` for as long as the native core can, in one call: the row changes of the
        open transaction (into ``assembler.ready``) or of an open stream block (into the
        spool), and — with ``begins`` — the Begin and Commit of normal transactions. The
        assembler then holds the state the same messages fed one by one would leave.
        Returns the index of the first message not taken (Python decodes it)."""
        assembler = self.assembler
        transaction = assembler.transaction
        open_ = None if transaction is None else (
            transaction.commit.commit_lsn, transaction.commit.commit_lsn_text,
            transaction.commit.tail, transaction.seq)
        stream_xid = assembler.stream_xid
        in_stream = self.decoder.in_stream
        self.commit_ts = 0
        if in_stream and stream_xid is None:
            return start
        if assembler.shapes.generation != self._shapes_seen:  # e.g. a codec rebuilt
            self.forget_tables()
        end, frames, committed, begun, seq, lsn = CORE.feed_batch(
            raw, start, self._batch_tables, self._learn, open_, in_stream, begins,
            assembler.ready)
        if end == start:
            return start
        self.received_lsn = lsn
        if frames is not None and stream_xid is not None:
            assembler.spool.add_frame(stream_xid, frames)
        if committed is not None:  # the last one: the assembler's state after it
            assembler.feed(Commit(*committed), lsn)
            self.commit_ts = committed[3]
        if begun is not None:
            assembler.feed(Begin(*begun), lsn)
        transaction = assembler.transaction
        if transaction is not None:
            transaction.seq = seq
        return end

    def _learn(self, oid: int) -> BatchTable | None:
        """What ``feed_batch`` takes of relation ``oid`` (kept while its shape is current);
        None when the decoder or the shapes do not know it, or a codec is not native."""
        if oid not in self.decoder.relations:
            return None
        try:
            shape = self.assembler.shapes.get(oid)
        except KeyError:
            return None
        known = self._tables.get(oid)
        if known is None or known[0] is not shape:  # a new Relation: a new shape
            known = self._tables[oid] = (shape, self._batch_table(shape))
        return known[1]

    def _batch_table(self, shape: TableShape) -> BatchTable | None:
        native = NativeTable.of(shape)
        if native is None:
            return None
        head = b',"source":{"db":%s,%s,"lsn":"' % (self._db, shape.source_names)
        return native.plan, shape.topic, head, shape.topic.encode(), shape.source_names

    def forget_tables(self) -> None:
        """A message Python decoded may have changed a relation's shape (a Relation, a
        Type, a DDL message …): ``feed_batch`` looks its tables up again first."""
        self._batch_tables.clear()
        self._shapes_seen = self.assembler.shapes.generation

    def drain(self, limit: int, max_bytes: int) -> None:
        """Move up to ``limit`` records (fewer once their values reach ``max_bytes``) of
        the committed transaction being drained to ``assembler.ready``, as
        ``TransactionAssembler.drain`` does; at its end, the assembler's own ``drain``
        closes it (``ack_lsn``)."""
        assembler = self.assembler
        drain = assembler.stream_drain
        if drain is None:
            return
        spool = drain.events
        if not isinstance(spool, CommittedSpool):
            assembler.drain(limit)
            return
        leftover = self._leftover if self._draining is spool else b""
        commit = drain.commit
        self._leftover, drain.seq, done = CORE.spool_records(
            spool.file, leftover, assembler.ready, limit, max_bytes, spool.aborted,
            (commit.db, commit.commit_lsn, commit.commit_lsn_text, commit.tail), drain.seq,
            SPOOL_CHUNK)
        self._draining = spool
        if done:
            self._draining = None
            spool.close()
            drain.handed_out = drain.seq  # nothing more: the reference's drain ends it
            assembler.drain(0)
