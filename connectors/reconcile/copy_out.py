"""The whole output of one ``COPY … TO STDOUT``, read at libpq's level.

PostgreSQL sends a COPY's rows one message each, and psycopg's ``Copy`` hands them over
one Python call (and generator round) each: for a chunk of narrow rows that costs more
than converting them. Here libpq's ``PQgetCopyData`` is called in a tight loop, and the
socket waited on (without the GIL) only when no row is buffered. The connection is
held (its lock) for the whole statement, and left idle after it, as psycopg leaves it.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

WAIT_S = 1.0  # a wait for the socket wakes up this often (to notice nothing, but stay live)


def copy_out(conn: psycopg.Connection[Any], statement: bytes) -> bytes:
    """The data ``statement`` (a ``COPY … TO STDOUT`` with every value inlined) sends,
    as one byte string; a server error is raised as psycopg raises it."""
    pgconn = conn.pgconn
    with conn.lock:
        pgconn.send_query(statement)
        try:
            started = _next_result(pgconn)
            if started is None or started.status != pq.ExecStatus.COPY_OUT:
                raise _error(started, "COPY TO STDOUT did not start")
            data = _copy_data(pgconn)
            finished = _next_result(pgconn)
            if finished is None or finished.status != pq.ExecStatus.COMMAND_OK:
                raise _error(finished, "COPY TO STDOUT did not complete")
        finally:
            _drain(pgconn)
    return data


def _copy_data(pgconn: pq.abc.PGconn) -> bytes:
    parts: list[Any] = []
    append, get = parts.append, pgconn.get_copy_data
    while True:
        size, data = get(1)
        if size > 0:
            append(data)
        elif size == 0:
            _wait_readable(pgconn)
            pgconn.consume_input()
        else:
            return b"".join(parts)


def _next_result(pgconn: pq.abc.PGconn) -> pq.abc.PGresult | None:
    """The next result of the running statement (``None``: no more)."""
    pgconn.consume_input()
    while pgconn.is_busy():
        _wait_readable(pgconn)
        pgconn.consume_input()
    return pgconn.get_result()


def _drain(pgconn: pq.abc.PGconn) -> None:
    while _next_result(pgconn) is not None:
        pass


def _wait_readable(pgconn: pq.abc.PGconn) -> None:
    select.select([pgconn.socket], [], [], WAIT_S)


def _error(result: pq.abc.PGresult | None, what: str) -> psycopg.Error:
    if result is not None and result.status == pq.ExecStatus.FATAL_ERROR:
        return error_from_result(result)
    return psycopg.OperationalError(what)
