"""The Python side of the native OpenSearch renderer's field kinds: the ``KIND_*`` bit
of a decoded JSON value (``distributary_native.FIELD_KINDS``), and the kinds of every
value of a document by its path (``deep_kinds_of``, the renderer's ``deep``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connectors.opensearch.native_actions import (
    KIND_BIG_INT,
    KIND_BOOL,
    KIND_INFINITE_TEXT,
    KIND_INT,
    KIND_NULL,
    KIND_STR,
    KIND_TYPES,
    PATH_SEPARATOR,
)

_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


def kind_of(value: Any) -> int:
    """The ``KIND_*`` bits of ``value``, as the renderer reports the values it meets."""
    if value is None:
        return KIND_NULL
    if isinstance(value, bool):
        return KIND_BOOL  # before int: a bool is an int in Python
    if isinstance(value, int):
        return KIND_INT if _LONG_MIN <= value <= _LONG_MAX else KIND_BIG_INT
    if value in ("infinity", "-infinity"):  # a date field cannot index these
        return KIND_STR | KIND_INFINITE_TEXT
    for bit, kind in KIND_TYPES:
        if isinstance(value, kind):
            return bit
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def deep_kinds_of(document: Mapping[str, Any]) -> dict[str, int]:
    """Every value of ``document`` by its path (names joined by ``PATH_SEPARATOR``) → the
    kinds met there; a list's items are at the list's own path."""
    found: dict[str, int] = {}

    def visit(path: str, value: Any) -> None:
        if isinstance(value, dict):
            for name, item in value.items():
                visit(f"{path}{PATH_SEPARATOR}{name}", item)
        elif isinstance(value, list):
            for item in value:
                visit(path, item)
        found[path] = found.get(path, 0) | kind_of(value)

    for name, value in document.items():
        visit(name, value)
    return found
