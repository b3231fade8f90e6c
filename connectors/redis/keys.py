"""Which Redis keys a table's rows get: the view's or the sink's ``key_template``, bound to
the table once, with the table's ``SCAN`` pattern and truncate marker."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from connectors.changes import Delete, Truncate, Upsert
from connectors.placeholders import NameTemplate, TableNames

from .truncate import marker_key


@dataclass(frozen=True, slots=True)
class TableKeys:
    """The keys of one table (through one view)."""

    render: Callable[[Mapping[str, Any]], str]  # a row's key from its key columns
    pattern: str                                # SCAN MATCH pattern of every row's key
    marker: str                                 # the table's truncate marker key


class KeyTemplates:
    """``TableKeys`` per template and table, built on first use."""

    def __init__(self, default_template: str) -> None:
        self._default = default_template
        self._templates: dict[str, NameTemplate] = {}
        self._tables: dict[tuple[str, TableNames], TableKeys] = {}

    def of(self, change: Upsert | Delete | Truncate) -> TableKeys:
        """The keys of the change's table and view."""
        source = (change.view.key_template if change.view is not None else None) \
            or self._default
        found = self._tables.get((source, change.names))
        if found is None:
            template = self._templates.get(source)
            if template is None:
                template = self._templates[source] = NameTemplate(source)
            pattern = template.pattern(change.names)
            found = TableKeys(template.bind(change.names), pattern, marker_key(pattern))
            self._tables[source, change.names] = found
        return found

    def key(self, change: Upsert | Delete) -> str:
        """The key of the change's row."""
        return self.of(change).render(change.key)
