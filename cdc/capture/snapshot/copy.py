"""Reading a table with ``COPY … TO STDOUT`` (text format) in bounded batches: as rows
of text values (``copy_batches``, the reference) or as chunks of whole raw lines
(``copy_chunks``, for the native converter of ``snapshot_native``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import sql

BATCH_ROWS = 5_000
CHUNK_BYTES = 256 << 10  # a chunk handed to the native converter: about this many bytes


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
