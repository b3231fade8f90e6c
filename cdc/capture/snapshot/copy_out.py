"""One simple-query message holding a ``COPY … TO STDOUT``, read at libpq's level.

PostgreSQL sends a COPY's rows one message each, and psycopg's ``Copy`` hands them over
one Python call each: for narrow rows that costs more than converting them. Here the
rows are drained from libpq by the native core (``copy_drain``: ``CopyDrain`` finds the
one libpq loaded in this process through the dynamic loader and uses it once its version
is psycopg's; else one ``PQgetCopyData`` call per row, no Python object per row kept),
and the socket is waited on (without the GIL) only when no row is buffered. The message
may hold queries before and after the COPY (one round trip for all): their results are
read in order.
"""

from __future__ import annotations

import functools
import logging
import selectors
import sys
import threading
from collections.abc import Generator, Iterator
from types import TracebackType
from typing import Any, NoReturn

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

from cdc.native import CORE

log = logging.getLogger(__name__)

WAIT_S = 1.0  # a wait for the socket wakes up this often (to look at ``stop``)
WHOLE = sys.maxsize  # chunk_bytes for the data in one chunk


def copy_drain(pgconn: pq.abc.PGconn) -> CORE.CopyDrain | None:
    """A native drain of ``pgconn``'s COPY OUT (the connection used by nobody else until
    the COPY ends), or None: read it row by row."""
    try:
        return CORE.CopyDrain(pgconn, pq.version())
    except (TypeError, ValueError) as exc:
        _refused(str(exc))
        return None


@functools.cache
def _refused(reason: str) -> None:
    """Say once why COPY is read row by row in this process."""
    log.info("reading COPY row by row (the native drain cannot use this libpq: %s)", reason)


class CopyStopped(Exception):
    """``stop`` was set while the COPY was read: it is abandoned (close the connection)."""


class CopyOut:
    """``with CopyOut(conn, message) as reading:`` sends ``message``; ``value``,
    ``chunks`` and ``data`` read its results in order. On leaving, the rest of the
    results are read (a COPY's data too) so the connection is usable again, unless the
    COPY was abandoned (``stop``, or ``chunks`` closed early). ``conn`` is used by nobody
    else meanwhile; server errors are raised as psycopg raises them."""

    def __init__(self, conn: psycopg.Connection[Any], message: bytes, *,
                 stop: threading.Event | None = None, wait_s: float = WAIT_S) -> None:
        self._conn = conn
        self._pgconn = conn.pgconn
        self._message = message
        self._stop = stop
        self._wait_s = wait_s
        self._waiter = selectors.DefaultSelector()  # select() cannot wait past fd 1023
        self._abandoned = False

    def __enter__(self) -> CopyOut:
        pgconn, fd = self._pgconn, self._pgconn.socket
        try:
            self._waiter.register(fd, selectors.EVENT_WRITE)
            pgconn.send_query(self._message)
            while pgconn.flush():
                self._waiter.select(self._wait_s)
            self._waiter.modify(fd, selectors.EVENT_READ)
        except BaseException:
            self._waiter.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        try:
            if not self._abandoned:
                self._skip_the_rest()
        finally:
            self._waiter.close()

    def value(self, what: str) -> bytes | None:
        """The first value of the next result (a query returning a row), as text;
        ``what`` is the error's message when it returned none."""
        result = self._next_result()
        if result is None or result.status != pq.ExecStatus.TUPLES_OK or result.ntuples < 1:
            raise self._error(result, what)
        return result.get_value(0, 0)

    def data(self) -> bytes:
        """The whole data of the next result (a COPY), as one byte string."""
        return b"".join(self.chunks(WHOLE))  # one chunk: joined without a copy

    def chunks(self, chunk_bytes: int) -> Iterator[bytes]:
        """The data of the next result (a COPY, text format) in chunks of whole lines of
        about ``chunk_bytes``, the last one once the COPY is known to have succeeded."""
        self._expect(pq.ExecStatus.COPY_OUT, "COPY TO STDOUT did not start")
        drain = copy_drain(self._pgconn)
        try:
            last = yield from (self._drained(drain, chunk_bytes) if drain is not None
                               else self._taken(chunk_bytes))
            self._expect(pq.ExecStatus.COMMAND_OK, "COPY TO STDOUT did not complete")
            if last:
                yield last
        except GeneratorExit:
            self._abandoned = True  # the rest of the COPY (or its end) is not read
            raise

    def _drained(self, drain: CORE.CopyDrain,
                 chunk_bytes: int) -> Generator[bytes, None, bytes | None]:
        """The COPY's rows by the native core, one call per chunk (or per wait);
        returns the last chunk."""
        while True:
            state, chunk = drain.drain(chunk_bytes)
            if state < 0:
                if state == CORE.CopyDrain.FAILED:
                    self._failed()
                return chunk  # DONE: the last lines
            if chunk is not None:
                yield chunk
            if state == CORE.CopyDrain.WAIT:
                self._wait()
                self._pgconn.consume_input()

    def _taken(self, chunk_bytes: int) -> Generator[bytes, None, bytes | None]:
        """``_drained`` through ``psycopg.pq``, one call per row (the reference)."""
        pgconn, pending = self._pgconn, bytearray()
        get = pgconn.get_copy_data
        while True:
            nbytes, row = get(1)
            if nbytes > 0:
                pending += row
                if len(pending) >= chunk_bytes and (end := pending.rfind(b"\n") + 1):
                    yield bytes(memoryview(pending)[:end])
                    del pending[:end]
            elif nbytes == 0:
                self._wait()
                pgconn.consume_input()
            elif nbytes == -1:  # as the native drain: whole lines only
                end = pending.rfind(b"\n") + 1
                return bytes(memoryview(pending)[:end]) if end else None
            else:
                self._failed()

    def _failed(self) -> NoReturn:
        self._abandoned = True  # libpq failed: nothing more to read
        raise psycopg.OperationalError(self._pgconn.get_error_message())

    def _wait(self) -> None:
        """Wait for the socket (at most ``wait_s``); ``CopyStopped`` if ``stop`` is set."""
        self._waiter.select(self._wait_s)
        if self._stop is not None and self._stop.is_set():
            self._abandoned = True
            raise CopyStopped

    def _next_result(self) -> pq.abc.PGresult | None:
        """The next result of the message (``None``: no more)."""
        pgconn = self._pgconn
        pgconn.consume_input()
        while pgconn.is_busy():
            self._wait()
            pgconn.consume_input()
        return pgconn.get_result()

    def _expect(self, status: pq.ExecStatus, what: str) -> None:
        result = self._next_result()
        if result is None or result.status != status:
            raise self._error(result, what)

    def _skip_the_rest(self) -> None:
        """Read the rest of the message's results (a COPY left running: its data too)."""
        while (result := self._next_result()) is not None:
            if result.status == pq.ExecStatus.COPY_OUT:
                self._skip_copy()

    def _skip_copy(self) -> None:
        get = self._pgconn.get_copy_data
        while (nbytes := get(1)[0]) >= 0:
            if nbytes == 0:
                self._wait()
                self._pgconn.consume_input()

    def _error(self, result: pq.abc.PGresult | None, what: str) -> psycopg.Error:
        if result is not None and result.status == pq.ExecStatus.FATAL_ERROR:
            return error_from_result(result, encoding=self._conn.info.encoding)
        return psycopg.OperationalError(what)
