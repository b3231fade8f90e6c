"""Reading a table with ``COPY … TO STDOUT`` (text format) in bounded batches: as rows
of text values (``copy_batches``, the reference) or as chunks of whole raw lines
(``copy_chunks``, for the native converter of ``snapshot_native``; ``copy_chunks_ahead``
reads them in a thread of its own, ahead of the caller)."""

from __future__ import annotations

import re
import threading
from collections.abc import Generator, Iterator
from typing import Any

import psycopg
from psycopg import sql

from cdc.readahead import ReadAhead

from .copy_out import CopyOut

BATCH_ROWS = 10_000  # a snapshot batch: ~5 MB of lines at ~500 bytes a row
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


def copy_chunks_ahead(conn: psycopg.Connection[Any], query: sql.Composable,
                      chunk_bytes: int = CHUNK_BYTES, *,
                      stop_check_s: float = STOP_CHECK_S) -> Generator[bytes, None, None]:
    """``copy_chunks``, read at libpq's level (``CopyOut``) by a thread of its own up to
    ``AHEAD_CHUNKS`` ahead: the next chunk arrives while the caller converts and appends
    this one. ``conn`` is not used by anyone else meanwhile; if the caller stops early,
    the COPY is abandoned (close the connection; the reader sees it within
    ``stop_check_s``)."""
    stop = threading.Event()
    chunks = ReadAhead(_copy_lines(conn, query, chunk_bytes, stop, stop_check_s),
                       AHEAD_CHUNKS, name="snapshot-copy", stop=stop)
    try:
        yield from chunks
    finally:
        chunks.close()


def _copy_lines(conn: psycopg.Connection[Any], query: sql.Composable, chunk_bytes: int,
                stop: threading.Event, stop_check_s: float) -> Iterator[bytes]:
    copy = sql.SQL("COPY ({}) TO STDOUT").format(query).as_bytes(conn)
    with CopyOut(conn, copy, stop=stop, wait_s=stop_check_s) as reading:
        yield from reading.chunks(chunk_bytes)
