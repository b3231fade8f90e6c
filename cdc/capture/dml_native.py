"""Streamed row changes through the native core: one pgoutput Insert, Update or Delete
message becomes its log record in one call (``native/src/pgoutput/``), byte for byte
what the decoder, ``insert_events``/``update_events``/``delete_events`` and ``complete``
make of it.

``NativeChanges.feed`` takes a message the capture received. It converts it only in
the plain case: a row change of a normal transaction that is open (not inside a
streamed one), of a relation the decoder knows whose codecs the native core all knows
(``NativeTable``). Everything else — other messages, streamed transactions, malformed
messages, values Python keeps as text (``unparsed``), an Update that changes the key —
is left to the caller's Python path, which gives the reference's records or errors.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import orjson

from cdc.native import DmlCore, dml_core

from .events import TableShape
from .pgoutput import PgOutputDecoder
from .snapshot_native import NativeTable
from .transactions import TransactionAssembler

_ROW_CHANGES = frozenset(b"IUD")
_OID = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class _Table:
    """One relation's native conversion, for the shape it was built from."""

    shape: TableShape
    plan: object | None  # None: the relation's changes stay on the Python path
    head: bytes  # the source block up to the message's LSN


class NativeChanges:
    """Row change messages of one replication session into ``assembler.ready``."""

    __slots__ = ("_db", "_tables", "assembler", "core", "decoder")

    def __init__(self, core: DmlCore, decoder: PgOutputDecoder,
                 assembler: TransactionAssembler) -> None:
        self.core = core
        self.decoder = decoder
        self.assembler = assembler
        self._db = orjson.dumps(assembler.database)
        self._tables: dict[int, _Table] = {}  # relation OID → its conversion

    @classmethod
    def of(cls, decoder: PgOutputDecoder, assembler: TransactionAssembler,
           core: DmlCore | None = None) -> NativeChanges | None:
        """The native path of a session, or None when the native core is off or lacks it."""
        core = core if core is not None else dml_core()
        return cls(core, decoder, assembler) if core is not None else None

    def feed(self, payload: bytes, wal_lsn: int) -> bool:
        """Append the record of the row change ``payload`` that arrived at ``wal_lsn`` to
        ``assembler.ready``; False (nothing done) when the Python path must take it."""
        if len(payload) < 6 or payload[0] not in _ROW_CHANGES or self.decoder.in_stream:
            return False
        transaction = self.assembler.transaction
        if transaction is None:
            return False
        (oid,) = _OID.unpack_from(payload, 1)
        if oid not in self.decoder.relations:
            return False
        try:
            shape = self.assembler.shapes.get(oid)
        except KeyError:
            return False
        table = self._tables.get(oid)
        if table is None or table.shape is not shape:  # a new Relation: a new shape
            table = self._tables[oid] = self._table(shape)
        if table.plan is None:
            return False
        commit = transaction.commit
        record = self.core.dml_record(payload, table.plan, shape.topic, wal_lsn, table.head,
                                      commit.commit_lsn, commit.commit_lsn_text, commit.tail,
                                      transaction.seq)
        if record is None:
            return False
        self.assembler.ready.append(record)
        transaction.seq += 1
        return True

    def _table(self, shape: TableShape) -> _Table:
        native = NativeTable.of(shape, self.core)
        head = b',"source":{"db":%s,%s,"lsn":"' % (self._db, shape.source_names)
        return _Table(shape, native.plan if native is not None else None, head)
