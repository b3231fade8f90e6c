"""Logical decoding messages (``pg_logical_emit_message``) in the stream: PostgreSQL 14+.

pgoutput sends them only with its ``messages`` option, which PostgreSQL 13 lacks. What
is built on them stops there with an error naming the version and the alternative,
rather than waiting for messages that never come: outbox messages
(``source.messages_prefixes``) refuse to start, ``cdc ddl install`` and ``cdc snapshot``
are refused, and an incremental snapshot the capture would perform (an interrupted
initial snapshot's remaining tables, a table joining the publication, snapshot mode
``always`` on an existing slot) is recorded as failed. Heartbeats still work: their WAL
record lets the slot advance whether or not the message itself is sent.
"""

from __future__ import annotations

from cdc.errors import TerminalError

MESSAGES_MIN_VERSION = 140000
"""The first ``server_version`` whose pgoutput sends logical decoding messages."""


class MessagesUnsupportedError(TerminalError):
    """A feature built on logical decoding messages, on a server whose pgoutput has none."""


def sends_messages(server_version: int) -> bool:
    """Whether pgoutput on this server sends logical decoding messages (14+)."""
    return server_version >= MESSAGES_MIN_VERSION


def _major(server_version: int) -> int:
    return server_version // 10000


def require_outbox_messages(server_version: int, prefixes: tuple[str, ...]) -> None:
    """Refuse ``source.messages_prefixes`` on a server that cannot send the messages."""
    if prefixes and not sends_messages(server_version):
        raise MessagesUnsupportedError(
            f"source.messages_prefixes {list(prefixes)}: PostgreSQL "
            f"{_major(server_version)}'s pgoutput sends no logical decoding messages "
            "(PostgreSQL 14+ does), so these messages would never reach the log. Remove "
            "source.messages_prefixes and write the outbox events as rows of a published "
            "table instead (each insert becomes an event on its topic), or upgrade the "
            "server to PostgreSQL 14 or later")


def ddl_capture_refusal(server_version: int) -> str | None:
    """Why ``cdc ddl install`` is refused on this server (None: it is not)."""
    if sends_messages(server_version):
        return None
    return (f"cdc ddl install: PostgreSQL {_major(server_version)}'s pgoutput sends no "
            "logical decoding messages (PostgreSQL 14+ does), so the DDL event triggers' "
            "messages would never reach <prefix>._ddl. Without them, schema changes still "
            "reach <prefix>._schemas from the stream and a table dropped and created again "
            "starts empty on its topic; only a plain DROP TABLE leaves the table's rows in "
            "the log. Upgrade the server to PostgreSQL 14 or later to record DDL")


def incremental_refusal(server_version: int, slot: str) -> str | None:
    """Why an incremental snapshot cannot be performed on this server (None: it can)."""
    if sends_messages(server_version):
        return None
    return (f"PostgreSQL {_major(server_version)}: incremental snapshots need their "
            "watermarks (logical decoding messages) in the stream, which pgoutput sends "
            "from PostgreSQL 14 on. To read tables again on this server, stop the capture, "
            f"drop the slot (SELECT pg_drop_replication_slot('{slot}')) and start it with "
            "--recreate-lost-slot: a new slot snapshots every published table, each after a "
            "truncate event; or upgrade the server to PostgreSQL 14 or later")
