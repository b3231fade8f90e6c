"""The pgoutput messages, one frozen dataclass per message type.

Layouts follow PostgreSQL's "Logical Replication Message Formats". LSNs are unsigned
64-bit integers, xids and OIDs unsigned 32-bit integers, timestamps signed 64-bit
microseconds since 2000-01-01 UTC (``commit_ts``), kept as integers here: formatting them
is the caller's choice (see ``cdc.capture.codecs.pg_micros_to_iso``).

The two-phase messages (``BeginPrepare``, ``Prepare``, ``CommitPrepared``,
``RollbackPrepared``, ``StreamPrepare``) come with protocol 3+ on a slot with two-phase
decoding; ``gid`` is the transaction's ``PREPARE TRANSACTION`` identifier.

``xid`` on Relation, TypeMsg, Insert, Update, Delete, Truncate and LogicalMessage is the
transaction id PostgreSQL adds only inside a protocol-2 stream block (between Stream
Start and Stream Stop); it is ``None`` everywhere else.

Tuple values (``TupleValue``): ``None`` is SQL NULL, ``UNCHANGED_TOAST`` a TOASTed value
PostgreSQL did not resend (it did not change, and it is *not* NULL), ``str`` a value in
text format, ``bytes`` a value in binary format (only if binary mode were enabled; it is
not). Text is decoded as UTF-8 with ``errors="surrogateescape"``: a database whose
encoding is SQL_ASCII may hold bytes that are not UTF-8, and those arrive as lone
surrogates U+DC80..U+DCFF instead of failing the stream; ``cdc.capture.codecs`` turns
them into visible ``\\xNN`` escapes before a value reaches JSON.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

__all__ = [
    "UNCHANGED_TOAST",
    "Begin",
    "BeginPrepare",
    "Column",
    "Commit",
    "CommitPrepared",
    "Delete",
    "Insert",
    "LogicalMessage",
    "Message",
    "OldKind",
    "Origin",
    "Prepare",
    "Relation",
    "RollbackPrepared",
    "StreamAbort",
    "StreamCommit",
    "StreamPrepare",
    "StreamStart",
    "StreamStop",
    "Truncate",
    "TupleValue",
    "TypeMsg",
    "UnchangedToast",
    "Update",
]


class UnchangedToast(enum.Enum):
    """The type of ``UNCHANGED_TOAST`` (an enum, so ``value is UNCHANGED_TOAST`` narrows)."""

    UNCHANGED_TOAST = "u"

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST: Final = UnchangedToast.UNCHANGED_TOAST
"""Tuple kind ``'u'``: a TOASTed value that did not change and was not sent."""

TupleValue: TypeAlias = "str | bytes | UnchangedToast | None"
OldKind: TypeAlias = Literal["K", "O"]


@dataclass(frozen=True, slots=True)
class Begin:
    """``B``: a (non-streamed) transaction starts; ``final_lsn`` is its commit LSN."""

    final_lsn: int
    commit_ts: int
    xid: int


@dataclass(frozen=True, slots=True)
class CommitFields:
    """What a Commit and a Stream Commit both carry."""

    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts: int


@dataclass(frozen=True, slots=True)
class Commit(CommitFields):
    """``C``: the transaction ends; acknowledge ``end_lsn`` once its events are durable."""


@dataclass(frozen=True, slots=True)
class Origin:
    """``O``: the transaction was replicated from another node named ``name``."""

    commit_lsn: int
    name: str


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a Relation message (generated and dropped columns are never sent)."""

    key: bool
    name: str
    type_oid: int
    type_modifier: int


@dataclass(frozen=True, slots=True, kw_only=True)
class InStream:
    """A message that may come inside a streamed transaction's block (protocol 2): ``xid``
    is that transaction's, None outside a stream; a keyword, after the message's fields."""

    xid: int | None = None


@dataclass(frozen=True, slots=True)
class Relation(InStream):
    """``R``: the shape of a table; sent before its first change (and after DDL)."""

    oid: int
    namespace: str
    name: str
    replica_identity: str
    columns: tuple[Column, ...]


@dataclass(frozen=True, slots=True)
class TypeMsg(InStream):
    """``Y``: a non-built-in type a following Relation uses (reload it from pg_catalog)."""

    oid: int
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Insert(InStream):
    """``I``: a new row."""

    relation_oid: int
    new: tuple[TupleValue, ...]


@dataclass(frozen=True, slots=True)
class Update(InStream):
    """``U``: a changed row; ``old_kind`` ``K`` (replica-identity key columns, the others
    NULL), ``O`` (the whole old row, REPLICA IDENTITY FULL) or None (key unchanged)."""

    relation_oid: int
    old_kind: OldKind | None
    old: tuple[TupleValue, ...] | None
    new: tuple[TupleValue, ...]


@dataclass(frozen=True, slots=True)
class Delete(InStream):
    """``D``: a removed row, identified by its key (``K``) or whole old row (``O``)."""

    relation_oid: int
    old_kind: OldKind
    old: tuple[TupleValue, ...]


@dataclass(frozen=True, slots=True)
class Truncate(InStream):
    """``T``: the relations were truncated (one message for a multi-table TRUNCATE)."""

    relation_oids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True, slots=True)
class LogicalMessage(InStream):
    """``M``: a ``pg_logical_emit_message`` (only with the ``messages`` option)."""

    transactional: bool
    lsn: int
    prefix: str
    content: bytes


@dataclass(frozen=True, slots=True)
class StreamStart:
    """``S``: a block of an in-progress transaction ``xid`` follows (protocol 2)."""

    xid: int
    first_segment: bool


@dataclass(frozen=True, slots=True)
class StreamStop:
    """``E``: the current stream block ends."""


@dataclass(frozen=True, slots=True)
class StreamCommit(CommitFields):
    """``c``: the streamed transaction ``xid`` committed (a keyword, after the commit's
    fields)."""

    xid: int = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class StreamAbort:
    """``A``: the streamed transaction ``xid`` (``subxid == xid``) or its subtransaction
    ``subxid`` aborted; drop what was buffered for it. ``abort_lsn``/``abort_ts`` are only
    sent with protocol 4 and ``streaming=parallel``."""

    xid: int
    subxid: int
    abort_lsn: int | None = None
    abort_ts: int | None = None


@dataclass(frozen=True, slots=True)
class PreparedFields:
    """What the messages that prepare a transaction for two-phase commit carry."""

    prepare_lsn: int
    end_lsn: int
    prepare_ts: int
    xid: int
    gid: str


@dataclass(frozen=True, slots=True)
class BeginPrepare(PreparedFields):
    """``b``: a transaction prepared for two-phase commit (``PREPARE TRANSACTION gid``)
    follows, its changes then ``Prepare`` (protocol 3, a ``two_phase`` slot)."""


@dataclass(frozen=True, slots=True)
class Prepare(PreparedFields):
    """``P``: the transaction begun by ``BeginPrepare`` is prepared; it is neither committed
    nor rolled back yet (``CommitPrepared`` or ``RollbackPrepared`` says which, later).
    ``flags`` (unused by PostgreSQL) is a keyword, after the other fields."""

    flags: int = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class CommitPrepared:
    """``K``: ``COMMIT PREPARED gid``: the prepared transaction ``xid`` committed at
    ``commit_lsn``; acknowledge ``end_lsn`` once its events are durable."""

    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts: int
    xid: int
    gid: str


@dataclass(frozen=True, slots=True)
class RollbackPrepared:
    """``r``: ``ROLLBACK PREPARED gid``: the prepared transaction ``xid`` is gone."""

    flags: int
    prepare_end_lsn: int
    rollback_end_lsn: int
    prepare_ts: int
    rollback_ts: int
    xid: int
    gid: str


@dataclass(frozen=True, slots=True)
class StreamPrepare(PreparedFields):
    """``p``: the streamed transaction ``xid`` is prepared (its changes came in stream
    blocks); ``CommitPrepared`` or ``RollbackPrepared`` follows later. ``flags`` as
    ``Prepare``'s."""

    flags: int = field(kw_only=True)


Message: TypeAlias = (
    Begin | Commit | Origin | Relation | TypeMsg | Insert | Update | Delete | Truncate
    | LogicalMessage | StreamStart | StreamStop | StreamCommit | StreamAbort | BeginPrepare
    | Prepare | CommitPrepared | RollbackPrepared | StreamPrepare
)

