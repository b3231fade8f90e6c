"""Name templates of the sinks (``{table}``, ``{prefix}:{key.id}``), compiled once.

Placeholders: ``{prefix}`` (the capture's topic prefix), ``{topic}``, ``{schema}``,
``{table}``, ``{key}`` (the whole key, ``derived.encode_key``) and ``{key.<column>}``
(one key column, ``derived.key_text``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from string import Formatter
from typing import Any

from derived import encode_key, key_text

_GLOB_SPECIAL = str.maketrans({c: "\\" + c for c in "\\*?[]"})


@dataclass(frozen=True, slots=True)
class TableNames:
    """What the table placeholders stand for, for one topic."""

    prefix: str
    topic: str
    schema: str
    table: str

    @classmethod
    def of(cls, topic: str, source: Mapping[str, Any], fallback_prefix: str = "") -> TableNames:
        """The names of an event's table; the prefix is the topic minus ``.<schema>.<table>``
        (``fallback_prefix`` when the topic is named otherwise)."""
        schema, table = str(source.get("schema") or ""), str(source.get("table") or "")
        suffix = f".{schema}.{table}"
        prefix = topic[:-len(suffix)] if topic.endswith(suffix) else fallback_prefix
        return cls(prefix, topic, schema, table)


class NameTemplate:
    """A compiled template; ``render`` is a join over precomputed parts."""

    __slots__ = ("_parts", "template", "uses_key")

    def __init__(self, template: str) -> None:
        self.template = template
        self._parts: list[tuple[str, str | None]] = []
        for literal, field, spec, conversion in Formatter().parse(template):
            if field is not None and (spec or conversion):
                raise ValueError(f"{template!r}: placeholders take no format spec or conversion")
            if field is not None and field not in ("prefix", "topic", "schema", "table", "key") \
                    and not field.startswith("key."):
                raise ValueError(f"{template!r}: unknown placeholder {{{field}}}")
            self._parts.append((literal, field))
        self.uses_key = any(f is not None and f.split(".")[0] == "key" for _, f in self._parts)

    def render(self, names: TableNames, key: Mapping[str, Any] | None = None) -> str:
        """The name for ``names`` and ``key`` (a missing key column renders ``\\N``)."""
        return "".join(literal + self._value(field, names, key) for literal, field in self._parts)

    def bind(self, names: TableNames) -> Callable[[Mapping[str, Any]], str]:
        """``render`` with the table placeholders filled in once: a function of the key
        alone, for rendering many keys of one table."""
        pieces: list[tuple[str, str | None]] = []  # (literal text, key field after it)
        text = ""
        for literal, field in self._parts:
            text += literal
            if field is not None and field.split(".")[0] != "key":
                text += self._value(field, names, None)
            elif field is not None:
                pieces.append((text, field))
                text = ""
        if len(pieces) == 1 and pieces[0][1] == "key":
            head, tail = pieces[0][0], text
            return lambda key: head + encode_key(key) + tail
        value = self._value
        return lambda key: "".join(literal + value(field, names, key)
                                   for literal, field in pieces) + text

    def pattern(self, names: TableNames) -> str:
        """A Redis ``SCAN MATCH`` pattern of every name of this table (key parts as ``*``)."""
        out: list[str] = []
        for literal, field in self._parts:
            out.append(literal.translate(_GLOB_SPECIAL))
            if field is not None:
                key_part = field.split(".")[0] == "key"
                out.append("*" if key_part else self._value(field, names, None)
                           .translate(_GLOB_SPECIAL))
        return "".join(out)

    @staticmethod
    def _value(field: str | None, names: TableNames, key: Mapping[str, Any] | None) -> str:
        if field is None:
            return ""
        if field == "key":
            return encode_key(key or {})
        if field.startswith("key."):
            return key_text((key or {}).get(field[4:]))
        return str(getattr(names, field))
