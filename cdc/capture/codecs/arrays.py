"""The array codec: PostgreSQL's array text (``array_out``) → nested JSON lists.

``{1,2,NULL}`` → ``[1, 2, null]``; ``{{1,2},{3,4}}`` → ``[[1, 2], [3, 4]]``; ``{}`` → ``[]``.
Elements go through the element type's codec; unquoted ``NULL`` is null, quoted
``"NULL"`` the string. Elements are double-quoted when they need it, with ``\\`` escaping
``"`` and ``\\``. The delimiter is the element type's ``typdelim`` (``;`` for ``box``).

Arrays whose lower bound is not 1 are written with a dimension decoration,
``[0:1]={1,2}``; the decoration is dropped and the elements kept in order (``[1, 2]``):
JSON lists have no lower bound, and readers of the event expect a list.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .base import Codec, CodecError, JSONValue, unescape_quoted

_DIMENSIONS = re.compile(r"(?:\[-?[0-9]+:-?[0-9]+\])+=")


@functools.cache
def _tokens(delimiter: str) -> re.Pattern[str]:
    d = re.escape(delimiter)
    space = "[ \t\n\r\v\f]*"  # array_isspace: ASCII whitespace only
    return re.compile(rf'{space}(?:(\{{)|(\}})|({d})|"((?:[^"\\]|\\.)*)"'
                      rf'|([^{{}}"\\ \t\n\r\v\f{d}]+)){space}', re.S)


@dataclass(frozen=True, slots=True)
class ArrayCodec:
    """The codec of arrays whose elements ``element`` decodes, ``delimiter`` apart (what
    the native core reads to take such a column itself)."""

    element: Codec
    delimiter: str = ","

    def __call__(self, text: str) -> JSONValue:
        return parse_array(text, self.element, self.delimiter)


def array_codec(element: Codec, delimiter: str = ",") -> Codec:
    """A codec for arrays whose elements ``element`` decodes."""
    return ArrayCodec(element, delimiter)


def parse_array(text: str, element: Codec, delimiter: str = ",") -> list[JSONValue]:
    """Parse one array literal as ``array_out`` writes it."""
    if text[:1] == "[":
        dims = _DIMENSIONS.match(text)
        if dims is None:
            raise CodecError("array", "malformed dimension decoration")
        text = text[dims.end():]
    if len(text) < 2 or text[0] != "{" or text[-1] != "}":
        raise CodecError("array", "expected {…}")
    inner = text[1:-1]
    if not inner:
        return []
    if '"' not in inner and "{" not in inner and "}" not in inner and "\\" not in inner:
        items = inner.split(delimiter)  # flat and unquoted: the common case
        if "" in items:
            raise CodecError("array", "empty element")
        return [None if item == "NULL" else element(item) for item in items]
    return _parse_nested(text, element, delimiter)


def _parse_nested(text: str, element: Codec, delimiter: str) -> list[JSONValue]:
    pattern = _tokens(delimiter)
    stack: list[list[JSONValue]] = []
    root: list[JSONValue] | None = None
    expect_item = True  # after '{' or a delimiter; else a delimiter or '}' must come
    pos, end = 0, len(text)
    while pos < end:
        match = pattern.match(text, pos)
        if match is None or match.end() == pos:
            raise CodecError("array", f"unexpected character at {pos}")
        pos = match.end()
        group = match.lastindex
        if group == 1:  # {
            if not expect_item or (root is not None and not stack):
                raise CodecError("array", f"misplaced '{{' before {pos}")
            nested: list[JSONValue] = []
            if stack:
                stack[-1].append(nested)
            else:
                root = nested
            stack.append(nested)
        elif group == 2:  # }
            if not stack or (expect_item and stack[-1]):
                raise CodecError("array", f"misplaced '}}' before {pos}")
            stack.pop()
            expect_item = False
        elif group == 3:  # delimiter
            if expect_item or not stack:
                raise CodecError("array", f"misplaced delimiter before {pos}")
            expect_item = True
            continue
        else:
            if not expect_item or not stack:
                raise CodecError("array", f"misplaced element before {pos}")
            if group == 4:
                stack[-1].append(element(unescape_quoted(match.group(4))))
            else:
                item = match.group(5)
                stack[-1].append(None if item == "NULL" else element(item))
            expect_item = False
            continue
        expect_item = group == 1
    if stack or root is None:
        raise CodecError("array", "unbalanced braces")
    return root
