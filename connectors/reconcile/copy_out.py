"""A walk's chunk read with ``COPY … TO STDOUT`` at libpq's level (``CopyOut``: the rows
drained by the native core, not one Python call each).

``copy_out_between`` sends one query before the COPY and one after it in the same
simple-query message (one round trip, each statement with its own snapshot on an
autocommit connection): a walk's chunk and the WAL positions around it cost one round
trip instead of three, and one wake-up of the reading thread instead of three (each
wake-up waits for the interpreter lock while the other threads compare). The connection
is held (its lock) for the whole message, and left idle after it, as psycopg leaves it.
"""

from __future__ import annotations

from typing import Any

import psycopg

from cdc.capture.snapshot.copy_out import CopyOut


def copy_out(conn: psycopg.Connection[Any], statement: bytes) -> bytes:
    """The data ``statement`` (a text ``COPY … TO STDOUT`` with every value inlined)
    sends, as one byte string; a server error is raised as psycopg raises it."""
    with conn.lock, CopyOut(conn, statement) as reading:
        return reading.data()


def copy_out_between(conn: psycopg.Connection[Any], before: bytes, statement: bytes,
                     after: bytes) -> tuple[bytes | None, bytes, bytes | None]:
    """``before``'s first value, the data of ``statement`` (as ``copy_out``), and
    ``after``'s first value, as text, from one message ``before; statement; after``
    (each query without parameters, returning one row; ``conn`` in autocommit)."""
    with conn.lock, CopyOut(conn, b"; ".join((before, statement, after))) as reading:
        first = reading.value("the query before COPY failed")
        data = reading.data()
        last = reading.value("the query after COPY failed")
    return first, data, last
