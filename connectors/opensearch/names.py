"""Index and alias names from rendered templates: what OpenSearch accepts."""

from __future__ import annotations

_FORBIDDEN = set('\\/*?"<>| ,#:')
MAX_NAME_BYTES = 255 - len("-99999")  # room for the concrete index's "-<n>"


def index_name(rendered: str) -> str:
    """``rendered`` lowercased, with characters OpenSearch forbids replaced by ``_``, no
    leading ``-``/``_``/``+``, and short enough for the ``-<n>`` of concrete indices."""
    name = "".join("_" if c in _FORBIDDEN else c for c in rendered.lower()).lstrip("-_+")
    name = name.encode()[:MAX_NAME_BYTES].decode(errors="ignore")
    if name in ("", ".", ".."):
        raise ValueError(f"{rendered!r} gives no usable index name")
    return name
