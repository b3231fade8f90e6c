"""pgoutput messages built byte by byte from the protocol documentation, for the tests.

Written independently of the decoder: each function follows one layout of PostgreSQL's
"Logical Replication Message Formats" (``xid`` is the protocol-2 stream prefix).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from cdc.capture.pgoutput import UNCHANGED_TOAST, TupleValue

Value = str | bytes | None | tuple[str]  # ("u",) stands for an unchanged TOAST value


def expected(values: Sequence[Value]) -> tuple[TupleValue, ...]:
    """The tuple the decoder should produce for ``values``."""
    return tuple(UNCHANGED_TOAST if isinstance(v, tuple) else v for v in values)


def cstring(text: str) -> bytes:
    """A NUL-terminated string."""
    return text.encode() + b"\0"


def xlog(payload: bytes, lsn: int) -> bytes:
    """The XLogData message (streaming replication protocol) carrying ``payload`` at
    ``lsn``: ``w``, start LSN, end LSN (both ``lsn``), send time 0, the message."""
    return b"w" + struct.pack(">QQq", lsn, lsn, 0) + payload


def _xid(xid: int | None) -> bytes:
    return b"" if xid is None else struct.pack(">I", xid)


def tuple_data(values: Sequence[Value]) -> bytes:
    """TupleData: Int16 count, then per column n / u / t+Int32+bytes / b+Int32+bytes."""
    out = struct.pack(">h", len(values))
    for value in values:
        if value is None:
            out += b"n"
        elif isinstance(value, tuple):
            out += b"u"
        elif isinstance(value, bytes):
            out += b"b" + struct.pack(">i", len(value)) + value
        else:
            raw = value.encode()
            out += b"t" + struct.pack(">i", len(raw)) + raw
    return out


def begin(final_lsn: int, commit_ts: int, xid: int) -> bytes:
    return b"B" + struct.pack(">Qq", final_lsn, commit_ts) + struct.pack(">I", xid)


def commit(commit_lsn: int, end_lsn: int, commit_ts: int, flags: int = 0) -> bytes:
    return b"C" + bytes([flags]) + struct.pack(">QQq", commit_lsn, end_lsn, commit_ts)


def origin(lsn: int, name: str) -> bytes:
    return b"O" + struct.pack(">Q", lsn) + cstring(name)


def relation(oid: int, namespace: str, name: str, columns: Sequence[tuple[int, str, int, int]],
             identity: bytes = b"d", xid: int | None = None) -> bytes:
    """``columns``: (flags, name, type OID, type modifier)."""
    out = b"R" + _xid(xid) + struct.pack(">I", oid) + cstring(namespace) + cstring(name)
    out += identity + struct.pack(">h", len(columns))
    for flags, column, type_oid, modifier in columns:
        out += bytes([flags]) + cstring(column) + struct.pack(">Ii", type_oid, modifier)
    return out


def type_message(oid: int, namespace: str, name: str, xid: int | None = None) -> bytes:
    return b"Y" + _xid(xid) + struct.pack(">I", oid) + cstring(namespace) + cstring(name)


def insert(oid: int, new: Sequence[Value], xid: int | None = None) -> bytes:
    return b"I" + _xid(xid) + struct.pack(">I", oid) + b"N" + tuple_data(new)


def update(oid: int, new: Sequence[Value], old: Sequence[Value] | None = None,
           kind: bytes = b"K", xid: int | None = None) -> bytes:
    out = b"U" + _xid(xid) + struct.pack(">I", oid)
    if old is not None:
        out += kind + tuple_data(old)
    return out + b"N" + tuple_data(new)


def delete(oid: int, old: Sequence[Value], kind: bytes = b"K", xid: int | None = None) -> bytes:
    return b"D" + _xid(xid) + struct.pack(">I", oid) + kind + tuple_data(old)


def truncate(oids: Sequence[int], options: int = 0, xid: int | None = None) -> bytes:
    return (b"T" + _xid(xid) + struct.pack(">i", len(oids)) + bytes([options])
            + b"".join(struct.pack(">I", oid) for oid in oids))


def message(prefix: str, content: bytes, lsn: int, transactional: bool = True,
            xid: int | None = None) -> bytes:
    return (b"M" + _xid(xid) + bytes([1 if transactional else 0]) + struct.pack(">Q", lsn)
            + cstring(prefix) + struct.pack(">i", len(content)) + content)


def stream_start(xid: int, first_segment: bool) -> bytes:
    return b"S" + struct.pack(">I", xid) + bytes([1 if first_segment else 0])


def stream_stop() -> bytes:
    return b"E"


def stream_commit(xid: int, commit_lsn: int, end_lsn: int, commit_ts: int,
                  flags: int = 0) -> bytes:
    return (b"c" + struct.pack(">I", xid) + bytes([flags])
            + struct.pack(">QQq", commit_lsn, end_lsn, commit_ts))


def stream_abort(xid: int, subxid: int, abort_lsn: int | None = None,
                 abort_ts: int | None = None) -> bytes:
    out = b"A" + struct.pack(">II", xid, subxid)
    if abort_lsn is not None and abort_ts is not None:
        out += struct.pack(">Qq", abort_lsn, abort_ts)
    return out


ORDERS_OID = 16385
ORDERS_COLUMNS = [(1, "id", 20, -1), (0, "customer_id", 23, -1), (0, "status", 25, -1),
                  (0, "amount", 1700, 786438), (0, "note", 25, -1), (0, "created_at", 1184, -1)]
ORDERS = relation(ORDERS_OID, "public", "orders", ORDERS_COLUMNS)


def begin_prepare(prepare_lsn: int, end_lsn: int, prepare_ts: int, xid: int, gid: str) -> bytes:
    """``b``: Int64 prepare LSN, Int64 end LSN, Int64 prepare time, Int32 xid, String gid."""
    return b"b" + struct.pack(">QQqI", prepare_lsn, end_lsn, prepare_ts, xid) + cstring(gid)


def _prepared(kind: bytes, lsn: int, end_lsn: int, ts: int, xid: int, gid: str,
              flags: int) -> bytes:
    return kind + bytes([flags]) + struct.pack(">QQqI", lsn, end_lsn, ts, xid) + cstring(gid)


def prepare(prepare_lsn: int, end_lsn: int, prepare_ts: int, xid: int, gid: str,
            flags: int = 0) -> bytes:
    """``P``: Int8 flags, Int64 prepare LSN, Int64 end LSN, Int64 prepare time, Int32 xid,
    String gid."""
    return _prepared(b"P", prepare_lsn, end_lsn, prepare_ts, xid, gid, flags)


def commit_prepared(commit_lsn: int, end_lsn: int, commit_ts: int, xid: int, gid: str,
                    flags: int = 0) -> bytes:
    """``K``: Int8 flags, Int64 commit LSN, Int64 end LSN, Int64 commit time, Int32 xid,
    String gid."""
    return _prepared(b"K", commit_lsn, end_lsn, commit_ts, xid, gid, flags)


def stream_prepare(prepare_lsn: int, end_lsn: int, prepare_ts: int, xid: int, gid: str,
                   flags: int = 0) -> bytes:
    """``p``: as Prepare."""
    return _prepared(b"p", prepare_lsn, end_lsn, prepare_ts, xid, gid, flags)


def rollback_prepared(prepare_end_lsn: int, rollback_end_lsn: int, prepare_ts: int,
                      rollback_ts: int, xid: int, gid: str, flags: int = 0) -> bytes:
    """``r``: Int8 flags, Int64 prepared transaction's end LSN, Int64 rollback's end LSN,
    Int64 prepare time, Int64 rollback time, Int32 xid, String gid."""
    return (b"r" + bytes([flags]) + struct.pack(">QQqqI", prepare_end_lsn, rollback_end_lsn,
                                                prepare_ts, rollback_ts, xid) + cstring(gid))
