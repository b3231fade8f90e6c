"""The sans-IO pgoutput decoder: one XLogData payload in, one message out.

``PgOutputDecoder`` keeps the only state the format needs: whether it is inside a stream
block (protocol 2 puts the transaction's xid first in data messages there) and the
Relation messages seen so far (data messages refer to a relation by OID and carry no
column count of their own to check against otherwise). It does no I/O. Protocol 3 adds the
two-phase messages (Begin Prepare, Prepare, Commit Prepared, Rollback Prepared, Stream
Prepare), which PostgreSQL sends only when ``two_phase`` is on.

Every malformed input — truncated, unknown message type or tuple kind, bad length, a
count that does not fit, trailing bytes, an OID with no Relation yet, stream blocks out
of order — raises ``cdc.errors.DecodeError(message_type, offset, reason)`` and nothing
else.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from cdc.errors import DecodeError

from .messages import (
    Begin,
    BeginPrepare,
    Column,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    OldKind,
    Origin,
    Prepare,
    Relation,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    TypeMsg,
    Update,
)
from .primitives import (
    expect_end,
    expect_size,
    need,
    read_cstring,
    read_tuple,
    type_name,
    unknown_relation,
)

_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_BEGIN = struct.Struct(">QqI")
_COMMIT = struct.Struct(">BQQq")
_ORIGIN = struct.Struct(">Q")
_REL_TAIL = struct.Struct(">BH")
_COLUMN_TAIL = struct.Struct(">Ii")
_OID_MARKER = struct.Struct(">IB")
_TRUNCATE = struct.Struct(">IB")
_MESSAGE = struct.Struct(">BQ")
_STREAM_START = struct.Struct(">IB")
_STREAM_COMMIT = struct.Struct(">IBQQq")
_STREAM_ABORT = struct.Struct(">II")
_ABORT_INFO = struct.Struct(">Qq")
_BEGIN_PREPARE = struct.Struct(">QQqI")  # prepare LSN, end LSN, prepare time, xid; gid
_PREPARE = struct.Struct(">BQQqI")  # flags, then as Begin Prepare (also Commit Prepared)
_ROLLBACK_PREPARED = struct.Struct(">BQQqqI")

_K, _N, _O = 0x4B, 0x4E, 0x4F
_MIN_COLUMN_BYTES = 10  # flags, an empty name's NUL, type OID, type modifier

_Handler = Callable[[bytes, int], Message]


class PgOutputDecoder:
    """Decodes pgoutput messages of one replication session (``proto_version`` 1 to 4)."""

    __slots__ = ("_handlers", "_in_stream", "proto_version", "relations")

    def __init__(self, proto_version: int = 1) -> None:
        if proto_version < 1:
            raise ValueError(f"pgoutput proto_version must be >= 1, not {proto_version}")
        self.proto_version = proto_version
        self.relations: dict[int, Relation] = {}
        self._in_stream = False
        handlers: dict[int, _Handler] = {
            ord("B"): self._begin, ord("C"): self._commit, ord("O"): self._origin,
            ord("R"): self._relation, ord("Y"): self._type, ord("I"): self._insert,
            ord("U"): self._update, ord("D"): self._delete, ord("T"): self._truncate,
            ord("M"): self._message,
        }
        if proto_version >= 2:
            handlers.update({
                ord("S"): self._stream_start, ord("E"): self._stream_stop,
                ord("c"): self._stream_commit, ord("A"): self._stream_abort,
            })
        if proto_version >= 3:
            handlers.update({
                ord("b"): self._begin_prepare, ord("P"): self._prepare,
                ord("K"): self._commit_prepared, ord("r"): self._rollback_prepared,
                ord("p"): self._stream_prepare,
            })
        self._handlers = handlers

    @property
    def in_stream(self) -> bool:
        """True between a Stream Start and its Stream Stop."""
        return self._in_stream

    def reset(self) -> None:
        """Forget the session's state (after a reconnect the server resends Relations)."""
        self._in_stream = False
        self.relations.clear()

    def decode(self, payload: bytes | bytearray | memoryview) -> Message:
        """Decode one message; raises ``DecodeError`` on anything malformed."""
        data = bytes(payload)  # a copy unless it is bytes already
        end = len(data)
        if end == 0:
            raise DecodeError("empty", 0, "empty payload")
        handler = self._handlers.get(data[0])
        if handler is None:
            raise DecodeError(type_name(data[0]), 0, "unknown message type")
        try:
            return handler(data, end)
        except (struct.error, IndexError, ValueError, OverflowError) as exc:  # a missed check
            raise DecodeError(type_name(data[0]), 0, f"malformed message: {exc}") from exc

    # -- transaction boundaries ----------------------------------------------------------
    def _begin(self, data: bytes, end: int) -> Message:
        self._expect_outside_stream("Begin")
        expect_size("Begin", end, 1 + _BEGIN.size)
        return Begin(*_BEGIN.unpack_from(data, 1))

    def _commit(self, data: bytes, end: int) -> Message:
        self._expect_outside_stream("Commit")
        expect_size("Commit", end, 1 + _COMMIT.size)
        return Commit(*_COMMIT.unpack_from(data, 1))

    def _origin(self, data: bytes, end: int) -> Message:
        need("Origin", 1, end, _ORIGIN.size, "origin commit LSN")
        (lsn,) = _ORIGIN.unpack_from(data, 1)
        name, pos = read_cstring(data, 9, "Origin", "origin name")
        expect_end("Origin", pos, end)
        return Origin(lsn, name)

    # -- schema --------------------------------------------------------------------------
    def _relation(self, data: bytes, end: int) -> Message:
        xid, pos = self._xid(data, end, "Relation")
        need("Relation", pos, end, 4, "relation OID")
        (oid,) = _U32.unpack_from(data, pos)
        namespace, pos = read_cstring(data, pos + 4, "Relation", "namespace")
        name, pos = read_cstring(data, pos, "Relation", "relation name")
        need("Relation", pos, end, _REL_TAIL.size, "replica identity and column count")
        identity, count = _REL_TAIL.unpack_from(data, pos)
        pos += _REL_TAIL.size
        if count * _MIN_COLUMN_BYTES > end - pos:
            raise DecodeError("Relation", pos - 2, f"column count {count} does not fit in "
                                                   f"the {end - pos} bytes left")
        columns = []
        for _ in range(count):
            need("Relation", pos, end, 1, "column flags")
            flags = data[pos]
            column, pos = read_cstring(data, pos + 1, "Relation", "column name")
            need("Relation", pos, end, _COLUMN_TAIL.size, "column type OID and modifier")
            type_oid, modifier = _COLUMN_TAIL.unpack_from(data, pos)
            pos += _COLUMN_TAIL.size
            columns.append(Column(bool(flags & 1), column, type_oid, modifier))
        expect_end("Relation", pos, end)
        relation = Relation(oid, namespace, name, chr(identity), tuple(columns), xid=xid)
        self.relations[oid] = relation
        return relation

    def _type(self, data: bytes, end: int) -> Message:
        xid, pos = self._xid(data, end, "Type")
        need("Type", pos, end, 4, "type OID")
        (oid,) = _U32.unpack_from(data, pos)
        namespace, pos = read_cstring(data, pos + 4, "Type", "namespace")
        name, pos = read_cstring(data, pos, "Type", "type name")
        expect_end("Type", pos, end)
        return TypeMsg(oid, namespace, name, xid=xid)

    # -- row changes -----------------------------------------------------------------------
    def _insert(self, data: bytes, end: int) -> Message:
        xid, pos = self._xid(data, end, "Insert") if self._in_stream else (None, 1)
        need("Insert", pos, end, 5, "relation OID and 'N'")
        oid, marker = _OID_MARKER.unpack_from(data, pos)
        if marker != _N:
            raise DecodeError("Insert", pos + 4, f"expected 'N' before the new tuple, got "
                                                 f"{type_name(marker)!r}")
        columns = self._columns("Insert", oid, pos)
        new, pos = read_tuple(data, pos + 5, end, "Insert", columns)
        expect_end("Insert", pos, end)
        return Insert(oid, new, xid=xid)

    def _update(self, data: bytes, end: int) -> Message:
        xid, pos = self._xid(data, end, "Update") if self._in_stream else (None, 1)
        need("Update", pos, end, 5, "relation OID and tuple marker")
        oid, marker = _OID_MARKER.unpack_from(data, pos)
        columns = self._columns("Update", oid, pos)
        pos += 5
        old_kind: OldKind | None = None
        old = None
        if marker in (_K, _O):
            old_kind = "K" if marker == _K else "O"
            old, pos = read_tuple(data, pos, end, "Update", columns)
            need("Update", pos, end, 1, "'N' marker")
            marker = data[pos]
            pos += 1
        if marker != _N:
            raise DecodeError("Update", pos - 1, f"expected 'K', 'O' or 'N', got "
                                                 f"{type_name(marker)!r}")
        new, pos = read_tuple(data, pos, end, "Update", columns)
        expect_end("Update", pos, end)
        return Update(oid, old_kind, old, new, xid=xid)

    def _delete(self, data: bytes, end: int) -> Message:
        xid, pos = self._xid(data, end, "Delete") if self._in_stream else (None, 1)
        need("Delete", pos, end, 5, "relation OID and tuple marker")
        oid, marker = _OID_MARKER.unpack_from(data, pos)
        if marker not in (_K, _O):
            raise DecodeError("Delete", pos + 4, f"expected 'K' or 'O', got "
                                                 f"{type_name(marker)!r}")
        columns = self._columns("Delete", oid, pos)
        old, pos = read_tuple(data, pos + 5, end, "Delete", columns)
        expect_end("Delete", pos, end)
        return Delete(oid, "K" if marker == _K else "O", old, xid=xid)

    def _truncate(self, data: bytes, end: int) -> Message:
        xid, pos = self._xid(data, end, "Truncate")
        need("Truncate", pos, end, _TRUNCATE.size, "relation count and options")
        count, options = _TRUNCATE.unpack_from(data, pos)
        pos += _TRUNCATE.size
        if count * 4 != end - pos:
            raise DecodeError("Truncate", pos - 5, f"{count} relation OIDs need {count * 4} "
                                                   f"bytes, {end - pos} are left")
        oids = struct.unpack_from(f">{count}I", data, pos)
        for index, oid in enumerate(oids):
            self._columns("Truncate", oid, pos + 4 * index)
        return Truncate(oids, bool(options & 1), bool(options & 2), xid=xid)

    def _message(self, data: bytes, end: int) -> Message:
        xid, pos = self._xid(data, end, "Message")
        need("Message", pos, end, _MESSAGE.size, "flags and LSN")
        flags, lsn = _MESSAGE.unpack_from(data, pos)
        prefix, pos = read_cstring(data, pos + _MESSAGE.size, "Message", "prefix")
        need("Message", pos, end, 4, "content length")
        (length,) = _I32.unpack_from(data, pos)
        if length != end - pos - 4:
            raise DecodeError("Message", pos, f"content length {length} does not match the "
                                              f"{end - pos - 4} bytes left")
        return LogicalMessage(bool(flags & 1), lsn, prefix, data[pos + 4:], xid=xid)

    # -- protocol 2 streaming ------------------------------------------------------------
    def _stream_start(self, data: bytes, end: int) -> Message:
        self._expect_outside_stream("Stream Start")
        expect_size("Stream Start", end, 1 + _STREAM_START.size)
        xid, first = _STREAM_START.unpack_from(data, 1)
        self._in_stream = True
        return StreamStart(xid, first == 1)

    def _stream_stop(self, data: bytes, end: int) -> Message:
        if not self._in_stream:
            raise DecodeError("Stream Stop", 0, "Stream Stop outside a stream block")
        expect_size("Stream Stop", end, 1)
        self._in_stream = False
        return StreamStop()

    def _stream_commit(self, data: bytes, end: int) -> Message:
        self._expect_outside_stream("Stream Commit")
        expect_size("Stream Commit", end, 1 + _STREAM_COMMIT.size)
        xid, *fields = _STREAM_COMMIT.unpack_from(data, 1)
        return StreamCommit(*fields, xid=xid)

    def _stream_abort(self, data: bytes, end: int) -> Message:
        self._expect_outside_stream("Stream Abort")
        size = 1 + _STREAM_ABORT.size
        if self.proto_version >= 4 and end == size + _ABORT_INFO.size:
            xid, subxid = _STREAM_ABORT.unpack_from(data, 1)
            abort_lsn, abort_ts = _ABORT_INFO.unpack_from(data, size)
            return StreamAbort(xid, subxid, abort_lsn, abort_ts)
        expect_size("Stream Abort", end, size)
        return StreamAbort(*_STREAM_ABORT.unpack_from(data, 1))

    # -- protocol 3 two-phase commit ---------------------------------------------------
    def _begin_prepare(self, data: bytes, end: int) -> Message:
        self._expect_outside_stream("Begin Prepare")
        need("Begin Prepare", 1, end, _BEGIN_PREPARE.size, "LSNs, timestamp and xid")
        prepare_lsn, end_lsn, prepare_ts, xid = _BEGIN_PREPARE.unpack_from(data, 1)
        gid = self._gid(data, 1 + _BEGIN_PREPARE.size, end, "Begin Prepare")
        return BeginPrepare(prepare_lsn, end_lsn, prepare_ts, xid, gid)

    def _prepare(self, data: bytes, end: int) -> Message:
        flags, lsn, end_lsn, ts, xid, gid = self._prepared_fields(data, end, "Prepare")
        return Prepare(lsn, end_lsn, ts, xid, gid, flags=flags)

    def _commit_prepared(self, data: bytes, end: int) -> Message:
        return CommitPrepared(*self._prepared_fields(data, end, "Commit Prepared"))

    def _stream_prepare(self, data: bytes, end: int) -> Message:
        flags, lsn, end_lsn, ts, xid, gid = self._prepared_fields(data, end, "Stream Prepare")
        return StreamPrepare(lsn, end_lsn, ts, xid, gid, flags=flags)

    def _rollback_prepared(self, data: bytes, end: int) -> Message:
        self._expect_outside_stream("Rollback Prepared")
        need("Rollback Prepared", 1, end, _ROLLBACK_PREPARED.size,
             "flags, LSNs, timestamps and xid")
        flags, prepare_end, rollback_end, prepare_ts, rollback_ts, xid = \
            _ROLLBACK_PREPARED.unpack_from(data, 1)
        gid = self._gid(data, 1 + _ROLLBACK_PREPARED.size, end, "Rollback Prepared")
        return RollbackPrepared(flags, prepare_end, rollback_end, prepare_ts, rollback_ts, xid,
                                gid)

    def _prepared_fields(self, data: bytes, end: int, message_type: str
                         ) -> tuple[int, int, int, int, int, str]:
        """Prepare, Commit Prepared and Stream Prepare: flags, an LSN, an end LSN, a
        timestamp, the xid and the gid."""
        self._expect_outside_stream(message_type)
        need(message_type, 1, end, _PREPARE.size, "flags, LSNs, timestamp and xid")
        flags, lsn, end_lsn, ts, xid = _PREPARE.unpack_from(data, 1)
        return flags, lsn, end_lsn, ts, xid, self._gid(data, 1 + _PREPARE.size, end,
                                                      message_type)

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def _gid(data: bytes, pos: int, end: int, message_type: str) -> str:
        gid, pos = read_cstring(data, pos, message_type, "gid")
        expect_end(message_type, pos, end)
        return gid

    def _xid(self, data: bytes, end: int, message_type: str) -> tuple[int | None, int]:
        if not self._in_stream:
            return None, 1
        need(message_type, 1, end, 4, "streamed transaction xid")
        return _U32.unpack_from(data, 1)[0], 5

    def _columns(self, message_type: str, oid: int, pos: int) -> int:
        relation = self.relations.get(oid)
        if relation is None:
            raise unknown_relation(message_type, oid, pos)
        return len(relation.columns)

    def _expect_outside_stream(self, message_type: str) -> None:
        if self._in_stream:
            raise DecodeError(message_type, 0, f"{message_type} inside a stream block")

