"""A table's rows as the walk compares them, made a chunk at a time.

A chunk of a walk is thousands of rows, each compared with one or two sinks, and a
Python call per row per step is most of what a walk costs. So a ``SourceRow`` is a
tuple (made without a Python call: ``tuple.__new__`` mapped over the chunk's columns),
and what every row of a chunk needs is computed for the whole chunk at once: its
``after`` JSON text (what a sink without a view stores), and its ``id_text``
(``derived.encode_key`` of its key: a document id, the heart of a Redis key). What few
rows need (the chunk key of a row that differs, the parsed ``after`` object of a row a
view filters) is computed on first use, from the row's COPY line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from itertools import repeat
from operator import itemgetter
from typing import Any

import orjson

from cdc.capture.snapshot.copy import copy_row
from derived import encode_key

KeyText = tuple[str, ...]  # a row's chunk-key columns as PostgreSQL's text
KeyParser = Callable[[bytes], KeyText]  # a COPY line → its chunk key


class SourceRow(tuple[Any, ...]):
    """One row as its event carries it: ``key`` and ``after`` objects, the ``after``
    object's JSON text when the read kept it (``after_json``, else ``b""``), ``stamp``
    (the row version's xmin and ctid; ``""`` when not read), the chunk key as text
    (``key_text``) and ``encode_key(key)`` (``id_text``).

    Fields (a tuple, see the module docstring): key, after_json, after (``None``: parse
    ``after_json`` on use), stamp, chunk key or the COPY line it is parsed from, the
    parser (``None``: the key is given), id_text.
    """

    __slots__ = ()

    def __new__(cls, key: dict[str, Any], after: dict[str, Any] | None, key_text: KeyText,
                stamp: str = "", *, after_json: bytes = b"") -> SourceRow:
        return tuple.__new__(cls, (key, after_json, after, stamp, key_text, None,
                                   encode_key(key)))

    @property
    def key(self) -> dict[str, Any]:
        """The event's ``key`` object."""
        return self[0]  # type: ignore[no-any-return]

    @property
    def after_json(self) -> bytes:
        """The ``after`` object's JSON text as the event carries it (``b""``: not kept)."""
        return self[1]  # type: ignore[no-any-return]

    @property
    def after(self) -> dict[str, Any]:
        """The event's ``after`` object (parsed from ``after_json`` on each use)."""
        after = self[2]
        return after if after is not None else orjson.loads(self[1])  # type: ignore[no-any-return]

    @property
    def stamp(self) -> str:
        """xmin@ctid of the row version read: equal stamps, no change between."""
        return self[3]  # type: ignore[no-any-return]

    @property
    def key_text(self) -> KeyText:
        """The row's chunk-key columns as PostgreSQL's text."""
        parse = self[5]
        return self[4] if parse is None else parse(self[4])  # type: ignore[no-any-return]

    @property
    def id_text(self) -> str:
        """``derived.encode_key(key)``."""
        return self[6]  # type: ignore[no-any-return]


after_jsons: Callable[[SourceRow], bytes] = itemgetter(1)
"""``row.after_json``, without a Python call (for ``map``)."""
id_texts: Callable[[SourceRow], str] = itemgetter(6)
"""``row.id_text``, without a Python call (for ``map``)."""

_new_row = partial(tuple.__new__, SourceRow)


def copy_rows(data: bytes, bodies: Sequence[tuple[bytes, bytes]], key_names: Sequence[str],
              key_at: Sequence[int]) -> list[SourceRow]:
    """The rows of a chunk read with ``COPY … TO STDOUT`` (text ``data``, one line a row)
    from the ``(key JSON, event body)`` ``read_event`` makes of each line (``bodies``);
    ``key_names``: the event key's columns; ``key_at``: the chunk key's column numbers."""
    key_jsons = [key for key, _ in bodies]
    keys: list[dict[str, Any]] = orjson.loads(b"[%s]" % b",".join(key_jsons))
    afters = list(map(after_json, key_jsons, [body for _, body in bodies]))
    lines = data.split(b"\n")
    lines.pop()  # after the last newline
    if len(lines) != len(keys):
        raise ValueError(f"{len(lines)} COPY lines for {len(keys)} converted rows")
    parse = partial(key_text_of, tuple(key_at))
    return list(map(_new_row, zip(keys, afters, repeat(None), repeat(""), lines,
                                  repeat(parse), encoded_keys(keys, key_names))))


def encoded_keys(keys: list[dict[str, Any]], key_names: Sequence[str]) -> list[str]:
    """``encode_key`` of each of ``keys`` (of the columns ``key_names``): one key column of
    integers or strings is its values' ``str`` (what ``key_text`` makes of them), mapped
    without a Python call; other keys are encoded one by one."""
    if len(key_names) == 1:
        values = list(map(itemgetter(key_names[0]), keys))
        if set(map(type, values)) <= {int, str}:  # not bool, None, float, …
            return list(map(str, values))
    return list(map(encode_key, keys))


def key_text_of(key_at: tuple[int, ...], line: bytes) -> KeyText:
    """The chunk key of one COPY text line (the columns ``key_at``, as text)."""
    if len(key_at) == 1 and b"\\" not in line:
        at = key_at[0]
        return (line.split(b"\t", at + 1)[at].decode(),)
    values = copy_row(line)
    return tuple(str(values[i]) for i in key_at)


_AFTER = b',"before":null,"after":'  # read_event's body: {"op":"r","key":K<_AFTER>A<_END>…
_AFTER_AT = len(b'{"op":"r","key":') + len(_AFTER)
_END = b',"unchanged":'


def after_json(key_json: bytes, body: bytes) -> bytes:
    """The ``after`` object of a snapshot event's body (``read_event``), as its text."""
    start = _AFTER_AT + len(key_json)
    if body.startswith(_AFTER, start - len(_AFTER)):
        return body[start:body.rindex(_END)]
    return orjson.dumps(orjson.loads(body)["after"])  # a layout this does not know
