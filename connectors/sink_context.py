"""What a sink factory reads from the runtime's context, whatever its exact shape.

The runtime calls ``SPEC.factory(config, context)``; the context has at least the
connector's name and the topic prefix, and may carry the log. These read them by the
usual attribute names (or mapping keys) and fall back to nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def context_value(context: object, *names: str) -> Any:
    """The first of ``names`` the context has (attribute or key), else ``None``."""
    for name in names:
        if isinstance(context, Mapping) and context.get(name) is not None:
            return context[name]
        value = getattr(context, name, None)
        if value is not None:
            return value
    return None


def topic_prefix_of(context: object) -> str:
    """The capture's topic prefix (``""`` when the context does not say)."""
    value = context_value(context, "topic_prefix", "prefix")
    return value if isinstance(value, str) else ""


def connector_name_of(context: object) -> str:
    """The connector's name (``""`` when the context does not say)."""
    value = context_value(context, "connector", "connector_name", "name")
    if isinstance(value, str):
        return value
    name = getattr(value, "name", None)  # a ConnectorConfig
    return name if isinstance(name, str) else ""
