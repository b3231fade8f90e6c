"""pgoutput, PostgreSQL's logical replication output plugin, decoded without I/O.

``PgOutputDecoder(proto_version).decode(payload)`` turns the payload of one XLogData
message into one of the message dataclasses below, keeping the Relation cache and the
stream-block state of the session. Malformed bytes raise ``cdc.errors.DecodeError``.
"""

from .decoder import PgOutputDecoder
from .messages import (
    UNCHANGED_TOAST,
    Begin,
    Column,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    OldKind,
    Origin,
    Relation,
    StreamAbort,
    StreamCommit,
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
    "Column",
    "Commit",
    "Delete",
    "Insert",
    "LogicalMessage",
    "Message",
    "OldKind",
    "Origin",
    "PgOutputDecoder",
    "Relation",
    "StreamAbort",
    "StreamCommit",
    "StreamStart",
    "StreamStop",
    "Truncate",
    "TupleValue",
    "TypeMsg",
    "UnchangedToast",
    "Update",
]
