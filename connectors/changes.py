"""From a batch of events to the changes a sink applies, one per event and view.

Shared by the OpenSearch and Redis sinks: routes each event through the views of its
table (or none: the row as is), and completes rows whose update left unchanged TOAST
columns out from what the batch itself knows (an earlier event of the same key) or from
``before`` (REPLICA IDENTITY FULL carries the old row in full), by
``derived.fill_unchanged``. What is still missing is the sink's to resolve against the
stored record (``upsert_record``, through ``derived.complete_record``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from connectors.contract import Rejection, SinkEvent
from connectors.placeholders import TableNames
from derived import ViewDefinition, complete_record, fill_unchanged

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Upsert:
    """Write the record ``view`` derives from ``row``; ``missing`` columns were not resent."""

    event: SinkEvent
    names: TableNames
    view: ViewDefinition | None
    key: dict[str, Any]
    row: dict[str, Any]
    missing: frozenset[str]


@dataclass(frozen=True, slots=True)
class Delete:
    """Remove the record of the event's key."""

    event: SinkEvent
    names: TableNames
    view: ViewDefinition | None
    key: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Truncate:
    """Remove every record of the table (of this view)."""

    event: SinkEvent
    names: TableNames
    view: ViewDefinition | None


Change = Upsert | Delete | Truncate


def upsert_record(change: Upsert, stored: Mapping[str, Any] | None, stored_what: str
                  ) -> dict[str, Any] | Rejection | None:
    """The record ``change`` writes, its unchanged TOAST columns taken from ``stored``
    (what the sink holds for the key; ``derived.complete_record``); ``None`` when the
    view's filter drops the row. Without a stored record to take them from, the record is
    written without those fields and a warning names them (``stored_what``: "value",
    "document")."""
    if change.view is None and not change.missing:
        return change.row  # the row as it is: no copy on the hot path
    done = complete_record(change.view, change.row, change.missing, stored)
    if done.problem is not None:
        return Rejection(change.event, done.problem)
    if done.unfilled:
        message = change.event.message
        log.warning("no stored %s to take unchanged TOAST fields %s from; writing without "
                    "them", stored_what, sorted(done.unfilled),
                    extra={"topic": message.topic, "partition": message.partition,
                           "offset": message.offset})
    return done.record
UPSERT_OPS = frozenset({"c", "u", "r"})


def passing_views(views: Sequence[ViewDefinition]) -> dict[tuple[str, str], ViewDefinition]:
    """``(schema, table)`` → view, of each table read by one view only, a view that copies
    every column as it is named and keeps every row (a joined view's records reach their
    sink through such a view): its records are the rows, so a sink may write them as it
    writes a table's rows, only under the view's names."""
    counts = Counter(view.table for view in views)
    return {view.table: view for view in views
            if counts[view.table] == 1 and view.fields is None and not view.exclude
            and not view.rename and not view.computed and view.filter is None}


class ChangeReader:
    """Turns batches into changes; knows the views and the topics' names."""

    def __init__(self, views: Sequence[ViewDefinition], fallback_prefix: str = "") -> None:
        self._views: dict[tuple[str, str], tuple[ViewDefinition, ...]] = {}
        for view in views:
            self._views[view.table] = (*self._views.get(view.table, ()), view)
        self._fallback_prefix = fallback_prefix
        self._names: dict[tuple[str, str, str], TableNames] = {}

    def read(self, batch: Sequence[SinkEvent]) -> tuple[list[Change], list[Rejection]]:
        """The changes of ``batch`` in its order, and the events that make no sense."""
        changes: list[Change] = []
        rejected: list[Rejection] = []
        rows: dict[tuple[str, bytes], dict[str, Any]] = {}
        for item in batch:
            op = item.event.get("op")
            if op == "m":
                continue
            if op not in UPSERT_OPS and op not in ("d", "t"):
                rejected.append(Rejection(item, f"unknown op {op!r}"))
                continue
            names = self._table_names(item)
            views: tuple[ViewDefinition | None, ...] = self._views.get(
                (names.schema, names.table), (None,))
            if op == "t":
                changes.extend(Truncate(item, names, view) for view in views)
                continue
            key = item.event.get("key")
            if not key or not isinstance(key, dict):
                rejected.append(Rejection(item, f"op {op!r} without a key"))
                continue
            identity = (item.message.topic, item.message.key)
            if op == "d":
                rows.pop(identity, None)
                changes.extend(Delete(item, names, view, key) for view in views)
                continue
            after = item.event.get("after")
            if not isinstance(after, dict):
                rejected.append(Rejection(item, f"op {op!r} without an 'after' row"))
                continue
            before = item.event.get("before")
            filled = fill_unchanged(after, item.event.get("unchanged"), rows.get(identity),
                                    before if isinstance(before, dict) else None)
            row, missing = filled.row, filled.missing
            rows[identity] = row
            if len(views) == 1:
                changes.append(Upsert(item, names, views[0], key, row, missing))
            else:
                changes.extend(Upsert(item, names, view, key, row, missing) for view in views)
        return changes, rejected

    def _table_names(self, item: SinkEvent) -> TableNames:
        source = item.event.get("source") or {}
        cache_key = (item.message.topic, str(source.get("schema")), str(source.get("table")))
        names = self._names.get(cache_key)
        if names is None:
            names = TableNames.of(item.message.topic, source, self._fallback_prefix)
            self._names[cache_key] = names
        return names

