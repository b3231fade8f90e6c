"""Streamed row changes through the native core: one pgoutput Insert, Update or Delete
message becomes its log record in one call (``native/src/pgoutput/``), byte for byte
what the decoder, ``insert_events``/``update_events``/``delete_events`` and ``complete``
make of it.

``NativeChanges.feed`` takes a message the capture received. It converts it only in
the plain case: a row change of a normal transaction that is open, or of a streamed
one inside its stream block (then into the frame ``StreamSpool.add`` would write), of a
relation the decoder knows whose codecs the native core all knows (``NativeTable``).
Everything else — other messages, malformed messages, values Python keeps as text
(``unparsed``), an Update that changes the key — is left to the caller's Python path,
which gives the reference's records or errors.

``NativeChanges.drain`` hands out a committed streamed (or prepared) transaction's
records from its spool file in chunks, one native call per chunk, where
``TransactionAssembler.drain`` reads and completes them one by one.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import orjson

from cdc.log import Record
from cdc.native import CORE

from ..events import CommitInfo, TableShape
from ..pgoutput import Begin, Commit, PgOutputDecoder
from ..snapshot.native import NativeTable
from .spool import CommittedSpool
from .transactions import TransactionAssembler

_ROW_CHANGES = frozenset(b"IUD")
_OID = struct.Struct(">I")
SPOOL_CHUNK = 1 << 22  # bytes of spool frames read at once while draining


@dataclass(frozen=True, slots=True)
class _Table:
    """One relation's native conversion, for the shape it was built from."""

    shape: TableShape
    plan: CORE.SnapshotPlan | None  # None: the relation's changes stay on the Python path
    head: bytes  # the source block up to the message's LSN
    topic: bytes  # the topic, UTF-8 (for spool frames)


class _SpoolReader:
    """The raw frames of one committed transaction's spool, read in chunks."""

    __slots__ = ("at", "buffer", "done", "spool")

    def __init__(self, spool: CommittedSpool) -> None:
        self.spool = spool
        self.buffer = b""
        self.at = 0  # where the first frame not handed out starts in ``buffer``
        self.done = False

    def refill(self) -> bool:
        """Read the next chunk after what is left of the buffer; False at the file's end."""
        file = self.spool.file
        more = file.read(SPOOL_CHUNK) if file is not None else b""
        if not more:
            self.done = True
            return False
        self.buffer = self.buffer[self.at:] + more
        self.at = 0
        return True


class NativeChanges:
    """Row change messages of one replication session into ``assembler.ready``."""

    __slots__ = ("_batch_tables", "_db", "_reader", "_tables", "assembler", "commit_ts",
                 "decoder", "received_lsn")

    def __init__(self, decoder: PgOutputDecoder, assembler: TransactionAssembler) -> None:
        self.decoder = decoder
        self.assembler = assembler
        self._db = orjson.dumps(assembler.database)
        self._tables: dict[int, _Table] = {}  # relation OID → its conversion
        self._reader: _SpoolReader | None = None  # of the streamed transaction draining
        # the tables ``feed_batch`` converts: OID → (plan, topic, head, topic UTF-8,
        # source names), filled by ``_table_of``, emptied by ``forget_tables``
        self._batch_tables: dict[int, tuple[CORE.SnapshotPlan, str, bytes, bytes, bytes]] = {}
        self.received_lsn = 0  # the end LSN of the last message ``feed_batch`` took
        self.commit_ts = 0  # the time of the last Commit ``feed_batch`` took (0: none)

    def feed(self, payload: bytes, wal_lsn: int) -> bool:
        """Append the record of the row change ``payload`` that arrived at ``wal_lsn`` to
        ``assembler.ready``; False (nothing done) when the Python path must take it."""
        if len(payload) < 6 or payload[0] not in _ROW_CHANGES:
            return False
        if self.decoder.in_stream:
            return self._feed_streamed(payload, wal_lsn)
        transaction = self.assembler.transaction
        if transaction is None:
            return False
        table = self._table_of(payload, 1)
        if table is None or table.plan is None:
            return False
        shape = table.shape
        commit = transaction.commit
        record = CORE.dml_record(payload, table.plan, shape.topic, wal_lsn, table.head,
                                 commit.commit_lsn, commit.commit_lsn_text, commit.tail,
                                 transaction.seq)
        if record is None:
            return False
        self.assembler.ready.append(record)
        transaction.seq += 1
        return True

    def feed_batch(self, raw: list[memoryview], start: int, *, begins: bool) -> int:
        """Take the messages of ``raw`` (CopyData payloads as received) from index
        ``start`` for as long as the native core can, in one call: the row changes of the
        open transaction (into ``assembler.ready``) or of an open stream block (into the
        spool), and — with ``begins`` — the Begin and Commit of normal transactions. The
        assembler then holds the state the same messages fed one by one would leave.
        Returns the index of the first message not taken (Python decodes it)."""
        assembler = self.assembler
        transaction = assembler.transaction
        open_ = None
        if transaction is not None:
            commit = transaction.commit
            open_ = (commit.commit_lsn, commit.commit_lsn_text, commit.tail, transaction.seq)
        stream_xid = assembler.stream_xid
        in_stream = self.decoder.in_stream
        self.commit_ts = 0
        if in_stream and stream_xid is None:
            return start
        end, frames, committed, begun, seq, lsn = CORE.feed_batch(
            raw, start, self._batch_tables, open_, in_stream, begins, assembler.ready)
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

    def forget_tables(self) -> None:
        """A message Python decoded may have changed a relation's shape (a Relation, a
        Type, a DDL message …): ``feed_batch`` looks its tables up again first."""
        self._batch_tables.clear()

    def _feed_streamed(self, payload: bytes, wal_lsn: int) -> bool:
        """A row change inside a stream block: its frame into the transaction's spool."""
        stream_xid = self.assembler.stream_xid
        if stream_xid is None or len(payload) < 10:
            return False
        table = self._table_of(payload, 5)
        if table is None or table.plan is None:
            return False
        frame = CORE.spool_frame(payload, table.plan, table.topic, table.shape.source_names,
                                 wal_lsn)
        if frame is None:
            return False
        self.assembler.spool.add_frame(stream_xid, frame)
        return True

    def _table_of(self, payload: bytes, at: int) -> _Table | None:
        """The conversion of the relation whose OID is at byte ``at``; None when the
        decoder or the shapes do not know it (the reference's error follows)."""
        (oid,) = _OID.unpack_from(payload, at)
        if oid not in self.decoder.relations:
            return None
        try:
            shape = self.assembler.shapes.get(oid)
        except KeyError:
            return None
        table = self._tables.get(oid)
        if table is None or table.shape is not shape:  # a new Relation: a new shape
            table = self._tables[oid] = self._table(shape)
        if table.plan is not None:  # for ``feed_batch``, as long as the shape is current
            self._batch_tables[oid] = (table.plan, shape.topic, table.head, table.topic,
                                       shape.source_names)
        return table

    def _table(self, shape: TableShape) -> _Table:
        native = NativeTable.of(shape)
        head = b',"source":{"db":%s,%s,"lsn":"' % (self._db, shape.source_names)
        return _Table(shape, native.plan if native is not None else None, head,
                      shape.topic.encode())

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
        reader = self._reader
        if reader is None or reader.spool is not spool:
            reader = self._reader = _SpoolReader(spool)
        ready = assembler.ready
        wanted = len(ready) + limit
        while True:
            records, reader.at, drain.seq, size = self._records(
                reader, drain.commit, drain.seq, wanted - len(ready), max_bytes)
            ready.extend(records)
            max_bytes -= size
            # stop when the batch is full, else read on past the buffer's whole frames
            if len(ready) >= wanted or max_bytes <= 0 or not reader.refill():
                break
        if reader.done:
            self._reader = None
            spool.close()
            drain.handed_out = drain.seq  # nothing more: the reference's drain ends it
            assembler.drain(0)

    def _records(self, reader: _SpoolReader, commit: CommitInfo, seq: int, limit: int,
                 max_bytes: int) -> tuple[list[Record], int, int, int]:
        """The records of the whole frames in the reader's buffer, numbered from ``seq``;
        where the first frame not consumed starts; the next ``seq``; the records' values'
        length in all."""
        return CORE.spool_records(reader.buffer, reader.at, limit, max_bytes,
                                  reader.spool.aborted, commit.db, commit.commit_lsn,
                                  commit.commit_lsn_text, commit.tail, seq)
