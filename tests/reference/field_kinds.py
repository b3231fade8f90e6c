"""The Python side of the native OpenSearch renderer's field kinds: the ``KIND_*`` bit
of a decoded JSON value (``distributary_native.FIELD_KINDS``)."""

from __future__ import annotations

from typing import Any

from connectors.opensearch.native_actions import (
    KIND_BIG_INT,
    KIND_BOOL,
    KIND_INT,
    KIND_NULL,
    KIND_TYPES,
)

_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


def kind_of(value: Any) -> int:
    """The ``KIND_*`` bit of ``value``, as the renderer reports the values it meets."""
    if value is None:
        return KIND_NULL
    if isinstance(value, bool):
        return KIND_BOOL  # before int: a bool is an int in Python
    if isinstance(value, int):
        return KIND_INT if _LONG_MIN <= value <= _LONG_MAX else KIND_BIG_INT
    for bit, kind in KIND_TYPES:
        if isinstance(value, kind):
            return bit
    raise TypeError(f"not a JSON value: {type(value).__name__}")
