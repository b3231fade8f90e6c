"""A logical replication connection on psycopg 3's ``pq`` layer.

psycopg 3 has no high-level replication API; this module speaks the streaming replication
protocol over a ``replication=database`` libpq connection: ``IDENTIFY_SYSTEM``, slot
commands, ``START_REPLICATION … LOGICAL`` and the CopyBoth sub-protocol (XLogData and
keepalive messages in, standby status updates out), with the socket in non-blocking mode.
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import struct
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple, NoReturn

from psycopg import pq, sql

from cdc.errors import SlotInUseError, SourceError

from ..lsn import format_lsn, parse_lsn
from ..source.session import pinned_conninfo, session_options

log = logging.getLogger(__name__)

OBJECT_IN_USE = b"55006"  # SQLSTATE: the slot is active for another walsender

PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_PG_EPOCH_UNIX_US = int(PG_EPOCH.timestamp()) * 1_000_000
_XLOG_HEADER = struct.Struct(">cQQq")
_KEEPALIVE = struct.Struct(">cQqB")
_STATUS = struct.Struct(">cQQQqB")
_W, _K = ord("w"), ord("k")
READ_BATCH = 1_000  # messages ``read_raw`` hands over at most
_SOCKET_SELECTOR: type[selectors.BaseSelector] = getattr(selectors, "PollSelector",
                                                         selectors.DefaultSelector)
# the text formats the codecs read (cdc.capture.codecs), pinned on the walsender
SESSION_OPTIONS = session_options()


class XLogData(NamedTuple):
    """One pgoutput message with the WAL positions it was sent with (a NamedTuple: one
    is made per change, cheaper than a frozen dataclass)."""

    start_lsn: int
    end_lsn: int
    payload: memoryview


class Keepalive(NamedTuple):
    """The server's keepalive: its WAL end and whether it wants a reply now."""

    wal_end: int
    reply_requested: bool


@dataclass(frozen=True, slots=True)
class SystemIdentity:
    """What ``IDENTIFY_SYSTEM`` returns."""

    system_id: str
    timeline: int
    xlogpos: int
    dbname: str | None


def protocol_version(major: int) -> int:
    """The highest pgoutput protocol PostgreSQL ``major`` speaks: 1 (13), 2 (14, streaming
    of large transactions), 3 (15, two-phase commit), 4 (16+, parallel apply)."""
    return 1 if major < 14 else 2 if major == 14 else 3 if major == 15 else 4


def now_pg_micros() -> int:
    """Microseconds since 2000-01-01 UTC, the protocol's clock."""
    return time.time_ns() // 1000 - _PG_EPOCH_UNIX_US


def replica_name() -> str:
    """``distributary <host> <pid>``: the walsender's ``application_name`` (unless the DSN
    sets one), so ``pg_stat_replication`` shows which replica holds the slot."""
    return f"distributary {socket.gethostname()} {os.getpid()}"[:63]


class ReplicationConnection:
    """A ``replication=database`` connection that can stream one logical slot."""

    def __init__(self, dsn: str) -> None:
        self._pgconn = pq.PGconn.connect(pinned_conninfo(
            dsn, replication="database",
            fallback_application_name=replica_name()).encode())
        if self._pgconn.status != pq.ConnStatus.OK:
            message = self._pgconn.get_error_message()
            self._pgconn.finish()
            raise SourceError(f"cannot open a replication connection: {message}")
        self._streaming = False
        self.proto_version = 1  # the pgoutput protocol ``start`` asked for
        # the socket's selector, made once (one per wait was ~3 % of a busy capture's CPU)
        self._selector: selectors.BaseSelector | None = None
        self._selector_events = 0

    @property
    def server_version(self) -> int:
        """The server's version as an integer, e.g. 150018."""
        return int(self._pgconn.server_version)

    # -- commands -----------------------------------------------------------------
    def command(self, query: sql.Composable) -> list[tuple[str | None, ...]]:
        """Run one replication command and return its rows as text."""
        result = self._pgconn.exec_(query.as_bytes(None))
        if result.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
            raise SourceError(f"replication command failed: {result.get_error_message()}")
        rows = []
        for row in range(result.ntuples):
            values = (result.get_value(row, col) for col in range(result.nfields))
            rows.append(tuple(v.decode() if v is not None else None for v in values))
        return rows

    def identify_system(self) -> SystemIdentity:
        """``IDENTIFY_SYSTEM``: system id, timeline, current WAL position, database."""
        (system_id, timeline, xlogpos, dbname), = self.command(sql.SQL("IDENTIFY_SYSTEM"))
        return SystemIdentity(str(system_id), int(timeline or 0), parse_lsn(xlogpos or "0/0"),
                              dbname)

    def create_slot(self, slot: str, *, temporary: bool = False, export_snapshot: bool = False,
                    two_phase: bool = False) -> tuple[int, str | None]:
        """Create a pgoutput slot; return its consistent point and the exported snapshot.
        ``two_phase``: decode prepared transactions at PREPARE (PostgreSQL 15+; ignored
        before, where pgoutput cannot)."""
        if two_phase and self.server_version >= 150000:
            query = sql.SQL("CREATE_REPLICATION_SLOT {} {} LOGICAL pgoutput "
                            "(SNAPSHOT {}, TWO_PHASE true)").format(
                sql.Identifier(slot), sql.SQL("TEMPORARY" if temporary else ""),
                sql.Literal("export" if export_snapshot else "nothing"))
        else:
            query = sql.SQL("CREATE_REPLICATION_SLOT {} {} LOGICAL pgoutput {}").format(
                sql.Identifier(slot), sql.SQL("TEMPORARY" if temporary else ""),
                sql.SQL("EXPORT_SNAPSHOT" if export_snapshot else "NOEXPORT_SNAPSHOT"))
        (_, consistent_point, snapshot, _), = self.command(query)
        return parse_lsn(consistent_point or "0/0"), snapshot

    def start(self, slot: str, publications: list[str], *, start_lsn: int = 0,
              messages: bool = True, streaming: bool = True, two_phase: bool = False) -> None:
        """``START_REPLICATION SLOT … LOGICAL`` with pgoutput options for this server, in
        the highest protocol it speaks (``proto_version`` after). ``two_phase``: the slot
        decodes prepared transactions (``pg_replication_slots.two_phase``, 15+)."""
        version = self.server_version // 10000
        proto = self.proto_version = protocol_version(version)
        options: list[tuple[str, str]] = [
            ("proto_version", str(proto)),
            ("publication_names", ",".join(sql.Identifier(p).as_string(None)
                                           for p in publications)),
        ]
        if messages and version >= 14:
            options.append(("messages", "true"))
        elif messages:
            log.warning("PostgreSQL %d's pgoutput sends no logical decoding messages: "
                        "DDL records and dropped-table events (cdc ddl) are not captured and "
                        "incremental snapshots fail (PostgreSQL 14+ has them)", version,
                        extra={"slot": slot})
        if streaming and proto >= 2:
            options.append(("streaming", "on"))  # not "parallel": nothing here applies
        if two_phase and proto >= 3:
            options.append(("two_phase", "on"))
        query = sql.SQL("START_REPLICATION SLOT {} LOGICAL {} ({})").format(
            sql.Identifier(slot), sql.SQL(format_lsn(start_lsn)),
            sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(k), sql.Literal(v))
                               for k, v in options))
        result = self._pgconn.exec_(query.as_bytes(None))
        if result.status != pq.ExecStatus.COPY_BOTH:
            failed = SlotInUseError if result.error_field(
                pq.DiagnosticField.SQLSTATE) == OBJECT_IN_USE else SourceError
            raise failed(f"START_REPLICATION failed: {result.get_error_message()}")
        self._pgconn.nonblocking = 1
        self._streaming = True
        log.info("replication started", extra={"slot": slot, "lsn": format_lsn(start_lsn),
                                                "proto_version": proto,
                                                "two_phase": two_phase and proto >= 3})

    # -- streaming ------------------------------------------------------------------
    def read(self, timeout: float) -> XLogData | Keepalive | None:
        """The next message, or None when nothing arrived within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            nbytes, data = self._pgconn.get_copy_data(1)
            if nbytes > 0:
                return parse_copy_message(data)
            if nbytes < 0:
                self._ended(nbytes)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if self._wait_socket(selectors.EVENT_READ, remaining):
                self._pgconn.consume_input()

    def _ended(self, nbytes: int) -> NoReturn:
        """``get_copy_data`` returned ``nbytes`` < 0: the stream ended (-1) or failed."""
        if nbytes == -1:
            self._streaming = False
            result = self._pgconn.get_result()
            detail = result.get_error_message() if result is not None else ""
            raise SourceError(f"replication stream ended by the server {detail}".strip())
        raise SourceError(f"replication stream failed: {self._pgconn.get_error_message()}")

    def read_raw(self, timeout: float, limit: int = READ_BATCH) -> list[memoryview]:
        """The next CopyData messages as received (``parse_copy_message`` reads one):
        waits up to ``timeout`` seconds for the first (none: an empty list), then takes
        up to ``limit`` in all of those already received, without waiting for more."""
        messages: list[memoryview] = []
        get_copy_data = self._pgconn.get_copy_data
        deadline = time.monotonic() + timeout
        while len(messages) < limit:
            nbytes, data = get_copy_data(1)
            if nbytes > 0:
                messages.append(data)
                continue
            if nbytes < 0:  # what came with it was never acknowledged: resent later
                self._ended(nbytes)
            remaining = deadline - time.monotonic()
            if messages or remaining <= 0:
                break
            if self._wait_socket(selectors.EVENT_READ, remaining):
                self._pgconn.consume_input()
        return messages

    def send_status(self, *, write: int, flush: int, apply: int | None = None,
                    reply: bool = False) -> None:
        """Standby status update: what is written, durably flushed, applied."""
        message = _STATUS.pack(b"r", write, flush, flush if apply is None else apply,
                               now_pg_micros(), 1 if reply else 0)
        if self._pgconn.put_copy_data(message) != 1:
            raise SourceError(f"cannot send status: {self._pgconn.get_error_message()}")
        self._flush()

    def _flush(self) -> None:
        while self._pgconn.flush() == 1:
            self._wait_socket(selectors.EVENT_WRITE, 1.0)

    def _wait_socket(self, events: int, timeout: float) -> bool:
        """Wait until the socket is ready for ``events``; False on timeout. ``selectors``
        (poll: no descriptor of its own), never ``select()``, which fails on descriptors
        numbered above 1023."""
        selector = self._selector
        if selector is None:
            selector = self._selector = _SOCKET_SELECTOR()
            selector.register(self._pgconn.socket, events)
        elif events != self._selector_events:
            selector.modify(self._pgconn.socket, events)
        self._selector_events = events
        return bool(selector.select(timeout))

    def close(self) -> None:
        """End the stream cleanly (CopyDone) and close the connection."""
        try:
            if self._streaming and self._pgconn.status == pq.ConnStatus.OK:
                self._pgconn.put_copy_end()
                self._flush()
        except Exception:  # closing must not raise over the real error
            log.debug("CopyDone failed while closing", exc_info=True)
        finally:
            self._streaming = False
            if self._selector is not None:
                self._selector.close()
                self._selector = None
            self._pgconn.finish()

    def __enter__(self) -> ReplicationConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_copy_message(data: memoryview) -> XLogData | Keepalive:
    """One CopyData message of the stream: XLogData or a keepalive."""
    kind = data[0]
    if kind == _W:
        _, start, end, _ = _XLOG_HEADER.unpack_from(data)
        return XLogData(start, end, data[_XLOG_HEADER.size:])
    if kind == _K:
        _, wal_end, _, reply = _KEEPALIVE.unpack_from(data)
        return Keepalive(wal_end, bool(reply))
    raise SourceError(f"unexpected replication message type {bytes(data[:1])!r}")
