"""A row's key as text: OpenSearch document ids, Redis keys, and their Spark rebuilds.

One key column: its text as is (``42``, ``ab:c``), so ids read like the primary key.
Several: each column's text in the key's column order (the table's, as the event lists
them), ``\\`` and the separator escaped with a backslash, joined by the separator
(``7:2``, ``a\\:b:c``). ``NULL`` is written ``\\N``, which no escaped text can be.
Booleans are ``true``/``false``; lists and objects canonical JSON (sorted keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

NULL_TEXT = "\\N"


def key_text(value: Any) -> str:
    """The text of one key column."""
    if isinstance(value, str):
        return value
    if value is None:
        return NULL_TEXT
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _escaped(value: Any, separator: str) -> str:
    if value is None:
        return NULL_TEXT
    return key_text(value).replace("\\", "\\\\").replace(separator, "\\" + separator)


def encode_key(key: Mapping[str, Any], separator: str = ":") -> str:
    """The text of a whole key (see the module docstring); ``""`` for an empty key."""
    if len(key) == 1:
        return key_text(next(iter(key.values())))
    return separator.join(_escaped(value, separator) for value in key.values())
