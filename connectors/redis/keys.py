"""Which Redis keys a table's rows get: the view's or the sink's ``key_template``, bound to
the table once, with the table's ``SCAN`` pattern and truncate marker."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from string import Formatter
from typing import Any

from connectors.changes import Delete, Truncate, Upsert
from connectors.placeholders import NameTemplate, TableNames
from derived import ViewDefinition

from .truncate import marker_key


@dataclass(frozen=True, slots=True)
class TableKeys:
    """The keys of one table (through one view)."""

    render: Callable[[Mapping[str, Any]], str]  # a row's key from its key columns
    pattern: str                                # SCAN MATCH pattern of every row's key
    marker: str                                 # the table's truncate marker key


KeyParts = tuple[list[tuple[str, str]], str, str]  # (pieces, tail, marker)


def key_parts(template: str, names: TableNames) -> tuple[list[tuple[str, str]], str]:
    """``template`` bound to table ``names`` as ``NameTemplate.bind`` binds it: the pieces
    ``(text, "key" | "key.<column>")`` (the text before each key placeholder, table
    placeholders filled in) and the text after the last one."""
    pieces: list[tuple[str, str]] = []
    text = ""
    for literal, field, _, _ in Formatter().parse(template):
        text += literal
        if field is None:
            continue
        if field.split(".")[0] == "key":
            pieces.append((text, field))
            text = ""
        else:
            text += str(getattr(names, field))
    return pieces, text


class KeyTemplates:
    """``TableKeys`` per template and table, built on first use."""

    def __init__(self, default_template: str) -> None:
        self._default = default_template
        self._templates: dict[str, NameTemplate] = {}
        self._tables: dict[tuple[str, TableNames], TableKeys] = {}
        self._last: tuple[object, object, TableKeys] | None = None  # (names, view, keys)

    def of(self, change: Upsert | Delete | Truncate) -> TableKeys:
        """The keys of the change's table and view."""
        last = self._last  # a batch is mostly one table: skip hashing its names
        if last is not None and last[0] is change.names and last[1] is change.view:
            return last[2]
        found = self.table(change.names, change.view)
        self._last = (change.names, change.view, found)
        return found

    def table(self, names: TableNames, view: ViewDefinition | None) -> TableKeys:
        """The keys of table ``names`` through ``view``."""
        source = (view.key_template if view is not None else None) or self._default
        found = self._tables.get((source, names))
        if found is None:
            template = self._templates.get(source)
            if template is None:
                template = self._templates[source] = NameTemplate(source)
            pattern = template.pattern(names)
            found = TableKeys(template.bind(names), pattern, marker_key(pattern))
            self._tables[source, names] = found
        return found

    def parts(self, names: TableNames) -> KeyParts:
        """The sink's own template for table ``names`` as ``key_parts`` gives it, with the
        table's truncate marker: what the native renderer needs (``plain``)."""
        pieces, tail = key_parts(self._default, names)
        return pieces, tail, self.table(names, None).marker

    def key(self, change: Upsert | Delete) -> str:
        """The key of the change's row."""
        return self.of(change).render(change.key)
