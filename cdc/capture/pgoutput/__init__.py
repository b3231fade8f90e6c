"""pgoutput, PostgreSQL's logical replication output plugin, decoded without I/O.

``PgOutputDecoder(proto_version).decode(payload)`` turns the payload of one XLogData
message into one of the message dataclasses below, keeping the Relation cache and the
stream-block state of the session (protocol 3+ adds the two-phase messages). Malformed
bytes raise ``cdc.errors.DecodeError``.
"""

from . import messages
from .decoder import PgOutputDecoder
from .messages import *  # noqa: F403 (every message class: ``messages.__all__``)

__all__ = ["PgOutputDecoder", *messages.__all__]
