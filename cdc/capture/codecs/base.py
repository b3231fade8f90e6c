"""What every codec shares: the JSON value type, the codec signature, the codec error, and
the text clean-up that keeps a value serialisable.

A codec turns one column value in PostgreSQL's text output format into the event's JSON
value (see "The event" in docs/architecture.md). NULL never reaches a codec: the caller maps
``None`` to ``null`` and ``UNCHANGED_TOAST`` to the event's ``unchanged`` list.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeAlias

from cdc.errors import TerminalError

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
Codec: TypeAlias = Callable[[str], JSONValue]

_ESCAPED_BYTES = re.compile("[\udc80-\udcff]")


class CodecError(TerminalError):
    """A column value's text is not what its type's output function writes.

    The message names the type and what was expected, never the value itself (column
    values may be personal data).
    """

    def __init__(self, type_name: str, reason: str) -> None:
        self.type_name = type_name
        self.reason = reason
        super().__init__(f"cannot decode a {type_name} value: {reason}")


def decode_text(text: str) -> str:
    """Text unchanged, except bytes that were not UTF-8 become visible ``\\xNN`` escapes.

    The pgoutput decoder decodes with ``surrogateescape`` (a SQL_ASCII database may hold
    any bytes); a lone surrogate cannot be written as JSON, so each escaped byte becomes
    the four characters ``\\xNN`` here. ASCII text (the common case) is returned at once.
    """
    if text.isascii() or _ESCAPED_BYTES.search(text) is None:
        return text
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def unescape_quoted(body: str) -> str:
    """The content of a double-quoted element of an array, record or range literal:
    ``\\x`` stands for ``x`` and (records, ranges) ``""`` for ``"``."""
    if "\\" not in body and '"' not in body:
        return body
    return _QUOTED_ESCAPE.sub(_unescape_one, body)


_QUOTED_ESCAPE = re.compile(r'""|\\(.)', re.S)


def _unescape_one(match: re.Match[str]) -> str:
    escaped = match.group(1)
    return '"' if escaped is None else escaped
