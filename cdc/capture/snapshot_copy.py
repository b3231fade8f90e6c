"""Reading a table with ``COPY … TO STDOUT`` (text format) in bounded batches."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import sql

BATCH_ROWS = 5_000


def _copy_field(text: str) -> str | None:
    if text == "\\N":
        return None
    return _COPY_ESCAPE.sub(lambda m: _COPY_ESCAPES.get(m.group(1), m.group(1)), text)


_COPY_ESCAPE = re.compile(r"\\(.)", re.S)
_COPY_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


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
            for line in lines:
                text = line.decode("utf-8", "surrogateescape")
                if "\\" in text:
                    batch.append([_copy_field(f) for f in text.split("\t")])
                else:
                    batch.append(text.split("\t"))  # type: ignore[arg-type]
            while len(batch) >= batch_rows:
                yield batch[:batch_rows]
                del batch[:batch_rows]
        if batch:
            yield batch
