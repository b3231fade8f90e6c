"""pgoutput, PostgreSQL's logical replication output plugin, decoded without I/O.

``PgOutputDecoder(proto_version).decode(payload)`` turns the payload of one XLogData
message into one of the message dataclasses below, keeping the Relation cache and the
stream-block state of the session (protocol 3+ adds the two-phase messages). Malformed
bytes raise ``cdc.errors.DecodeError``.
"""

from .decoder import PgOutputDecoder
from .messages import (
    UNCHANGED_TOAST,
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
    TupleValue,
    TypeMsg,
    UnchangedToast,
    Update,
)

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
    "PgOutputDecoder",
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
