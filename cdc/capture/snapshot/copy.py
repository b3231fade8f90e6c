"""Reading a table with ``COPY … TO STDOUT`` (text format) in bounded batches: as rows
of text values (``copy_batches``, the reference) or as chunks of whole raw lines
(``copy_chunks``, for the native converter of ``snapshot_native``; ``copy_chunks_ahead``
reads them in a thread of its own, ahead of the caller)."""

from __future__ import annotations

import queue
import re
import selectors
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any

import psycopg
from psycopg import pq, sql

from .libpq import CopyDrain, copy_drain

BATCH_ROWS = 5_000
CHUNK_BYTES = 256 << 10  # a chunk handed to the native converter: about this many bytes
AHEAD_CHUNKS = 4  # chunks ``copy_chunks_ahead`` reads before they are taken
STOP_CHECK_S = 0.5  # a reader waiting for data looks this often whether to stop


def _copy_field(text: str) -> str | None:
    if text == "\\N":
        return None
    return _COPY_ESCAPE.sub(lambda m: _COPY_ESCAPES.get(m.group(1), m.group(1)), text)


_COPY_ESCAPE = re.compile(r"\\(.)", re.S)
_COPY_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def copy_row(line: bytes) -> list[str | None]:
    """One COPY text line (without its newline) → its text values (None for NULL)."""
    text = line.decode("utf-8", "surrogateescape")
    if "\\" in text:
        return [_copy_field(f) for f in text.split("\t")]
    return text.split("\t")  # type: ignore[return-value]


def copy_chunks(conn: psycopg.Connection[Any], query: sql.Composable,
                chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The raw data of ``COPY (query) TO STDOUT`` (text format) in chunks of whole lines,
    each ending with a newline, about ``chunk_bytes`` long (a row may span the data
    blocks psycopg returns: a chunk ends at the last newline, the rest starts the next)."""
    with conn.cursor().copy(sql.SQL("COPY ({}) TO STDOUT").format(query)) as copy:
        pending = bytearray()
        for block in copy:
            pending += block
            if len(pending) >= chunk_bytes:
                end = pending.rfind(b"\n") + 1
                if end:
                    yield bytes(memoryview(pending)[:end])
                    del pending[:end]
        end = pending.rfind(b"\n") + 1  # as copy_batches: COPY ends every row with one
        if end:
            yield bytes(memoryview(pending)[:end])


def copy_batches(conn: psycopg.Connection[Any], query: sql.Composable,
                 batch_rows: int = BATCH_ROWS) -> Iterator[list[list[str | None]]]:
    """The rows of ``COPY (query) TO STDOUT`` (text format) as lists of text values
    (None for NULL), ``batch_rows`` at a time: memory stays bounded however big the table."""
    with conn.cursor().copy(sql.SQL("COPY ({}) TO STDOUT").format(query)) as copy:
        rest = b""
        batch: list[list[str | None]] = []
        for block in copy:
            lines = (rest + bytes(block)).split(b"\n")
            rest = lines.pop()
            batch.extend(copy_row(line) for line in lines)
            while len(batch) >= batch_rows:
                yield batch[:batch_rows]
                del batch[:batch_rows]
        if batch:
            yield batch


def _read_copy(conn: psycopg.Connection[Any], copy: bytes, chunk_bytes: int,
               put: Callable[[bytes | None], None], stop: threading.Event,
               stop_check_s: float) -> None:
    """``copy`` (``COPY … TO STDOUT``) through ``psycopg.pq``, its rows drained from libpq
    by the native core (``libpq.copy_drain``; else one C call per row), the socket waited
    on without the GIL (``stop`` looked at every ``stop_check_s`` meanwhile): ``put`` each
    chunk of whole lines, then ``put(None)``."""
    with selectors.DefaultSelector() as waiter:  # select() cannot wait past fd 1023
        _copy_out(conn, copy, chunk_bytes, put, stop, stop_check_s, waiter)


def _copy_out(conn: psycopg.Connection[Any], copy: bytes, chunk_bytes: int,
              put: Callable[[bytes | None], None], stop: threading.Event,
              stop_check_s: float, waiter: selectors.BaseSelector) -> None:
    pgconn = conn.pgconn
    fd = pgconn.socket
    waiter.register(fd, selectors.EVENT_WRITE)
    pgconn.send_query(copy)
    while pgconn.flush():
        waiter.select()
    waiter.modify(fd, selectors.EVENT_READ)
    while True:
        pgconn.consume_input()
        if not pgconn.is_busy():
            break
        waiter.select()
    result = pgconn.get_result()
    if result is None or result.status != pq.ExecStatus.COPY_OUT:
        while pgconn.get_result() is not None:
            pass
        if result is None:
            raise psycopg.OperationalError("COPY returned no result")
        raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
    drain = copy_drain(pgconn)
    pending = bytearray()
    if drain is not None:
        ended = _drain_rows(pgconn, drain, chunk_bytes, put, stop, stop_check_s, waiter,
                            pending)
    else:
        ended = _take_rows(pgconn, chunk_bytes, put, stop, stop_check_s, waiter, pending)
    if ended is None:
        return  # abandoned: the connection is closed, not reused
    if ended == -2:
        raise psycopg.OperationalError(pgconn.get_error_message())
    result = pgconn.get_result()
    while pgconn.get_result() is not None:
        pass
    if result is None or result.status != pq.ExecStatus.COMMAND_OK:
        if result is None:
            raise psycopg.OperationalError("COPY ended with no result")
        raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
    end = pending.rfind(b"\n") + 1
    if end:
        put(bytes(memoryview(pending)[:end]))
    put(None)


def _take_rows(pgconn: pq.abc.PGconn, chunk_bytes: int, put: Callable[[bytes | None], None],
               stop: threading.Event, stop_check_s: float, waiter: selectors.BaseSelector,
               pending: bytearray) -> int | None:
    """The rows of the COPY one ``get_copy_data`` call each (the reference of
    ``_drain_rows``), ``put`` in chunks; the lines after the last chunk left in
    ``pending``. Returns -1 when the COPY ended, -2 when libpq failed, None if stopped."""
    get = pgconn.get_copy_data
    while not stop.is_set():
        nbytes, data = get(1)
        if nbytes > 0:
            pending += data
            if len(pending) >= chunk_bytes:
                end = pending.rfind(b"\n") + 1
                if end:
                    put(bytes(memoryview(pending)[:end]))
                    del pending[:end]
        elif nbytes == 0:
            waiter.select(stop_check_s)  # then ``stop`` is looked at again
            pgconn.consume_input()
        else:
            return nbytes
    return None


def _drain_rows(pgconn: pq.abc.PGconn, drain: CopyDrain, chunk_bytes: int,
                put: Callable[[bytes | None], None], stop: threading.Event,
                stop_check_s: float, waiter: selectors.BaseSelector,
                pending: bytearray) -> int | None:
    """``_take_rows`` by the native core: one call per chunk (or per read of the
    socket). Leaves and returns what ``_take_rows`` does."""
    while not stop.is_set():
        state, chunk = drain.drain(chunk_bytes)
        if chunk is not None and state < 0:
            pending += chunk  # put once the COPY's result is known, as ``_take_rows``'
        elif chunk is not None:
            put(chunk)
        if state == 0:
            waiter.select(stop_check_s)  # then ``stop`` is looked at again
            pgconn.consume_input()
        elif state < 0:
            return state
    return None


def copy_chunks_ahead(conn: psycopg.Connection[Any], query: sql.Composable,
                      chunk_bytes: int = CHUNK_BYTES, *,
                      stop_check_s: float = STOP_CHECK_S) -> Generator[bytes, None, None]:
    """``copy_chunks``, read by a thread of its own up to ``AHEAD_CHUNKS`` ahead: the
    next chunk arrives while the caller converts and appends this one. ``conn`` is not
    used by anyone else meanwhile; if the caller stops early, the COPY is abandoned
    (close the connection; the reader sees it within ``stop_check_s``)."""
    ready: queue.Queue[bytes | BaseException | None] = queue.Queue(AHEAD_CHUNKS)
    stop = threading.Event()

    def put(item: bytes | BaseException | None) -> None:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def run() -> None:
        try:
            copy = sql.SQL("COPY ({}) TO STDOUT").format(query).as_bytes(conn)
            _read_copy(conn, copy, chunk_bytes, put, stop, stop_check_s)
        except BaseException as exc:  # handed to the caller
            put(exc)

    reader = threading.Thread(target=run, name="snapshot-copy", daemon=True)
    reader.start()
    try:
        while True:
            item = ready.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        reader.join()
