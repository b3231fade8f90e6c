"""The whole output of one ``COPY … TO STDOUT``, read at libpq's level.

PostgreSQL sends a COPY's rows one message each, and psycopg's ``Copy`` hands them over
one Python call (and generator round) each: for a chunk of narrow rows that costs more
than converting them. Here libpq's ``PQgetCopyData`` is called in a tight loop, and the
socket waited on (without the GIL) only when no row is buffered. The connection is
held (its lock) for the whole statement, and left idle after it, as psycopg leaves it.
"""

from __future__ import annotations

import selectors
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

WAIT_S = 1.0  # a wait for the socket wakes up this often (to notice nothing, but stay live)


def copy_out(conn: psycopg.Connection[Any], statement: bytes) -> bytes:
    """The data ``statement`` (a ``COPY … TO STDOUT`` with every value inlined) sends,
    as one byte string; a server error is raised as psycopg raises it."""
    pgconn = conn.pgconn
    # selectors, not select(): select() cannot wait on a descriptor past 1023
    with conn.lock, selectors.DefaultSelector() as waiter:
        waiter.register(pgconn.socket, selectors.EVENT_READ)

        def wait() -> None:
            waiter.select(WAIT_S)

        pgconn.send_query(statement)
        try:
            started = _next_result(pgconn, wait)
            if started is None or started.status != pq.ExecStatus.COPY_OUT:
                raise _error(started, "COPY TO STDOUT did not start")
            data = _copy_data(pgconn, wait)
            finished = _next_result(pgconn, wait)
            if finished is None or finished.status != pq.ExecStatus.COMMAND_OK:
                raise _error(finished, "COPY TO STDOUT did not complete")
        finally:
            _drain(pgconn, wait)
    return data


def _copy_data(pgconn: pq.abc.PGconn, wait: Callable[[], None]) -> bytes:
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


def _next_result(pgconn: pq.abc.PGconn, wait: Callable[[], None]) -> pq.abc.PGresult | None:
    """The next result of the running statement (``None``: no more)."""
    pgconn.consume_input()
    while pgconn.is_busy():
        wait()
        pgconn.consume_input()
    return pgconn.get_result()


def _drain(pgconn: pq.abc.PGconn, wait: Callable[[], None]) -> None:
    while _next_result(pgconn, wait) is not None:
        pass


def _error(result: pq.abc.PGresult | None, what: str) -> psycopg.Error:
    if result is not None and result.status == pq.ExecStatus.FATAL_ERROR:
        return error_from_result(result)
    return psycopg.OperationalError(what)
