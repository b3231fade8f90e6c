"""The whole output of one ``COPY … TO STDOUT``, read at libpq's level.

PostgreSQL sends a COPY's rows one message each, and psycopg's ``Copy`` hands them over
one Python call (and generator round) each: for a chunk of narrow rows that costs more
than converting them. Here libpq's ``PQgetCopyData`` is called in a tight loop, and the
socket waited on (without the GIL) only when no row is buffered. The connection is
held (its lock) for the whole statement, and left idle after it, as psycopg leaves it.

``copy_out_between`` sends one query before the COPY and one after it in the same
simple-query message (one round trip, each statement with its own snapshot on an
autocommit connection): a walk's chunk and the WAL positions around it cost one round
trip instead of three, and one wake-up of the reading thread instead of three (each
wake-up waits for the interpreter lock while the other threads compare).
"""

from __future__ import annotations

import selectors
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

WAIT_S = 1.0  # a wait for the socket wakes up this often (to notice nothing, but stay live)

Wait = Callable[[], None]


def copy_out(conn: psycopg.Connection[Any], statement: bytes) -> bytes:
    """The data ``statement`` (a ``COPY … TO STDOUT`` with every value inlined) sends,
    as one byte string; a server error is raised as psycopg raises it."""
    return _run(conn, statement, before=False, after=False)[1]


def copy_out_between(conn: psycopg.Connection[Any], before: bytes, statement: bytes,
                     after: bytes) -> tuple[bytes | None, bytes, bytes | None]:
    """``before``'s first value, the data of ``statement`` (as ``copy_out``), and
    ``after``'s first value, as text, from one message ``before; statement; after``
    (each query without parameters, returning one row; ``conn`` in autocommit)."""
    query = b"; ".join((before, statement, after))
    return _run(conn, query, before=True, after=True)


def _run(conn: psycopg.Connection[Any], query: bytes, *, before: bool,
         after: bool) -> tuple[bytes | None, bytes, bytes | None]:
    pgconn = conn.pgconn
    first = last = None
    # selectors, not select(): select() cannot wait on a descriptor past 1023
    with conn.lock, selectors.DefaultSelector() as waiter:
        waiter.register(pgconn.socket, selectors.EVENT_READ)

        def wait() -> None:
            waiter.select(WAIT_S)

        pgconn.send_query(query)
        try:
            if before:
                first = _value(_next_result(pgconn, wait), "the query before COPY failed")
            started = _next_result(pgconn, wait)
            if started is None or started.status != pq.ExecStatus.COPY_OUT:
                raise _error(started, "COPY TO STDOUT did not start")
            data = _copy_data(pgconn, wait)
            finished = _next_result(pgconn, wait)
            if finished is None or finished.status != pq.ExecStatus.COMMAND_OK:
                raise _error(finished, "COPY TO STDOUT did not complete")
            if after:
                last = _value(_next_result(pgconn, wait), "the query after COPY failed")
        finally:
            _drain(pgconn, wait)
    return first, data, last


def _value(result: pq.abc.PGresult | None, what: str) -> bytes | None:
    if result is None or result.status != pq.ExecStatus.TUPLES_OK or result.ntuples < 1:
        raise _error(result, what)
    return result.get_value(0, 0)


def _copy_data(pgconn: pq.abc.PGconn, wait: Wait) -> bytes:
    parts: list[Any] = []
    append, get = parts.append, pgconn.get_copy_data
    while True:
        size, data = get(1)
        if size > 0:
            append(data)
        elif size == 0:
            wait()
            pgconn.consume_input()
        else:
            return b"".join(parts)


def _next_result(pgconn: pq.abc.PGconn, wait: Wait) -> pq.abc.PGresult | None:
    """The next result of the running statement (``None``: no more)."""
    pgconn.consume_input()
    while pgconn.is_busy():
        wait()
        pgconn.consume_input()
    return pgconn.get_result()


def _drain(pgconn: pq.abc.PGconn, wait: Wait) -> None:
    """Read the rest of the message's results (a COPY left running: its data too)."""
    while (result := _next_result(pgconn, wait)) is not None:
        if result.status == pq.ExecStatus.COPY_OUT:
            _copy_data(pgconn, wait)


def _error(result: pq.abc.PGresult | None, what: str) -> psycopg.Error:
    if result is not None and result.status == pq.ExecStatus.FATAL_ERROR:
        return error_from_result(result)
    return psycopg.OperationalError(what)
