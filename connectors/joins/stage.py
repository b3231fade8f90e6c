"""``JoinStage``: applies change events to the store and says which records they touch.

Each joined view is a tree of levels (``derived.JoinedView``). A changed row of a table
touches, at every level that reads that table, the records holding its old or its new
values: at the root, its own record; below, the parent rows it joins (the order of an
item, every order of a customer), then theirs, up to the roots. Records are built
after a whole batch is applied, from the store, so the order events of different tables
are read in changes nothing in the end: each table's rows are the last of their key.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from cdc.log import Position
from connectors.contract import SinkEvent
from derived import JoinedTable, JoinedView, JoinLevel, build_records, fill_unchanged, join_values
from derived.join_build import Keyed

from .store import JoinStore, LinkValue, Table, key_bytes, link_value, row_link_value

log = logging.getLogger(__name__)

UPSERT_OPS = frozenset({"c", "u", "r"})


@dataclass(frozen=True, slots=True)
class Edge:
    """A level below the root, with the level it joins into (their settings read once:
    a config model's attributes are slow to reach per row)."""

    level: JoinedTable
    parent: JoinLevel
    table: Table
    parent_table: Table
    parent_columns: tuple[str, ...]
    child_columns: tuple[str, ...]

    @classmethod
    def of(cls, level: JoinedTable, parent: JoinLevel) -> Edge:
        on = level.join_on()
        return cls(level, parent, level.table, parent.table, tuple(on), tuple(on.values()))


def edges(view: JoinedView) -> Iterator[Edge]:
    """Every level below the root of ``view`` with its parent level."""
    pending: list[JoinLevel] = [view]
    while pending:
        level = pending.pop()
        for joined in level.joined():
            yield Edge.of(joined, level)
            pending.append(joined)


def store_indexes(views: Sequence[JoinedView]) -> set[tuple[Table, tuple[str, ...]]]:
    """The ``(table, columns)`` the store indexes: both sides of every join."""
    indexes: set[tuple[Table, tuple[str, ...]]] = set()
    for view in views:
        for edge in edges(view):
            indexes.add((edge.table, edge.child_columns))
            indexes.add((edge.parent_table, edge.parent_columns))
    return indexes


class JoinStage:
    """The joined views of one connector over one store."""

    def __init__(self, views: Sequence[JoinedView], store: JoinStore) -> None:
        self.views = tuple(views)
        self.store = store
        # where each table is read: (view, the edge into its level; None: the root)
        self._levels: dict[Table, list[tuple[JoinedView, Edge | None]]] = {}
        for view in self.views:
            self._levels.setdefault(view.table, []).append((view, None))
            for edge in edges(view):
                self._levels.setdefault(edge.table, []).append((view, edge))
        self._parent_edge: dict[int, Edge] = {id(edge.level): edge
                                              for view in self.views for edge in edges(view)}
        self._roots = {view.target: view.table for view in self.views}

    def tables(self) -> set[Table]:
        """Every table a joined view reads."""
        return set(self._levels)

    def preload(self, events: Sequence[tuple[SinkEvent, Table]], touch: bool = True) -> None:
        """Read together, before the events are applied, the stored rows of their keys,
        then the keys of the rows their old and new rows join one level up (an item's
        order): ``apply`` then finds them without a query each. Not to ``touch`` (an
        initial load's snapshot reads): nothing (``apply`` reads nothing then)."""
        if not touch:
            return
        keys: dict[Table, list[bytes]] = {}
        for item, table in events:
            key = item.event.get("key")
            if isinstance(key, dict) and key:
                keys.setdefault(table, []).append(key_bytes(key))
        for table, found in keys.items():
            self.store.preload(table, found)
        joined: dict[tuple[Table, tuple[str, ...]], list[tuple[Any, ...]]] = {}
        for item, table in events:
            levels = self._levels.get(table)
            if levels is None:
                continue
            data = item.event
            rows = [data.get("after")]
            if data.get("op") != "r":  # a snapshot read's key is new to the store (mostly)
                key = data.get("key")
                rows.append(self.store.row(table, key_bytes(key))
                            if isinstance(key, dict) and key else None)
            for _, edge in levels:
                if edge is None:
                    continue
                for row in rows:
                    if isinstance(row, dict) and (
                            values := join_values(row, edge.child_columns)) is not None:
                        joined.setdefault((edge.parent_table, edge.parent_columns),
                                          []).append(values)
        for (parent, columns), wanted in joined.items():
            self.store.preload_keys(parent, columns, wanted)

    def apply(self, event: SinkEvent, table: Table, touch: bool = True) -> int:
        """Apply one event of ``table`` to the store, marking the records it touches
        pending; returns how many root records it marked. Not to ``touch``: a snapshot
        read of an initial load (``JoinStore.begin_load``), which marks every record and
        links every row when it ends: the stored row of its key is not read."""
        data = event.event
        op = data.get("op")
        position = event.message.position
        if position <= self.store.truncated(table):
            return 0  # from before a truncate applied already (read from another partition)
        if op == "t":
            return self._truncate(table, position)
        key = data.get("key")
        if not isinstance(key, dict) or not key:
            raise ValueError(f"op {op!r} without a key")
        stored_key = key_bytes(key)
        old = self.store.row(table, stored_key) if touch else None
        new: dict[str, Any] | None = None
        if op in UPSERT_OPS:
            after = data.get("after")
            if not isinstance(after, dict):
                raise ValueError(f"op {op!r} without an 'after' row")
            before = data.get("before")
            filled = fill_unchanged(after, data.get("unchanged"), old,
                                    before if isinstance(before, dict) else None)
            new = filled.row
            if filled.missing and op == "c":
                new = self._key_changed(table, stored_key, position, new, filled.missing)
            elif filled.missing:
                log.warning("%s: no stored row to take unchanged TOAST columns %s from; "
                            "keeping the row without them", ".".join(table),
                            sorted(filled.missing))
        elif op != "d":
            raise ValueError(f"unknown op {op!r}")
        marked = self._touch(table, stored_key, old, new) if touch else 0
        self.store.put(table, stored_key, new, old, position)
        if op == "d" and old is not None:
            marked += self._completes_insert(table, position, old)
        return marked

    def load(self, table: Table, key: bytes, row: bytes, position: Position) -> None:
        """Apply a snapshot read of an initial load (``apply`` with ``touch`` false), as
        the native core read it: its key's stored form and its row's JSON."""
        if position > self.store.truncated(table):
            self.store.put_loaded(table, key, row, position)

    def _key_changed(self, table: Table, key: bytes, position: Position,
                     row: dict[str, Any], missing: frozenset[str]) -> dict[str, Any]:
        """``row`` (a new key's insert lacking unchanged TOAST columns) completed from the
        old key's row deleted just before it; or kept to be completed when that comes."""
        previous = Position(position.commit_lsn, position.seq - 1)
        deleted = self.store.deleted(table, previous) if position.seq > 0 else None
        if deleted is not None:
            return fill_unchanged(row, sorted(missing), deleted).row
        self.store.wait_for_delete(table, position, key, sorted(missing))
        return row

    def _completes_insert(self, table: Table, position: Position,
                          deleted: dict[str, Any]) -> int:
        """Keep ``deleted``; complete the key change's insert if it was read first."""
        self.store.keep_deleted(table, position, deleted)
        waiting = self.store.waiting_insert(
            table, Position(position.commit_lsn, position.seq + 1))
        if waiting is None:
            return 0
        key, missing = waiting
        row = self.store.row(table, key)
        if row is None:  # deleted again (moved on?) before its first half was read
            log.warning("%s: a key change's insert lacked unchanged TOAST columns %s, and "
                        "its row is gone before they could be completed", ".".join(table),
                        missing)
            return 0
        completed = fill_unchanged(row, missing, deleted).row
        marked = self._touch(table, key, row, completed)
        self.store.put(table, key, completed, row, self.store.position(table, key))
        return marked

    def _truncate(self, table: Table, position: Position) -> int:
        marked = 0
        for key, row in self.store.rows_before(table, position):
            marked += self._touch(table, key, row, None)
        self.store.truncate(table, position)
        return marked

    def _touch(self, table: Table, key: bytes, old: dict[str, Any] | None,
               new: dict[str, Any] | None) -> int:
        marked = 0
        for view, edge in self._levels.get(table, ()):
            roots: set[bytes] = set()
            rows = [row for row in (old, new) if row is not None]
            if edge is None:
                roots.add(key)
            else:
                self._roots_above(edge, rows, roots)
            self.store.add_pending(view.target, roots)
            marked += len(roots)
        return marked

    def _roots_above(self, edge: Edge, rows: Iterable[dict[str, Any]], roots: set[bytes]
                     ) -> None:
        """Add the root keys whose records hold ``rows`` at ``edge``'s level."""
        above = self._parent_edge.get(id(edge.parent))
        for row in rows:
            values = join_values(row, edge.child_columns)
            if values is None:
                continue
            if above is None:  # the parent is the root
                roots.update(self.store.matching_keys(edge.parent_table, edge.parent_columns,
                                                      values))
                continue
            parents = [parent_row for _, parent_row in
                       self.store.matching(edge.parent_table, edge.parent_columns, values)]
            self._roots_above(above, parents, roots)

    def records(self, view: JoinedView, keys: Sequence[bytes]
                ) -> list[tuple[bytes, dict[str, Any] | None]]:
        """Each of ``keys`` with its current record in ``view`` (``None``: it has none),
        from the committed store (outside a transaction), its rows read a level at a time
        for all of them."""
        roots = self.store.rows_of(view.table, keys)
        rows = PageRows(self.store, view, roots.values())
        return list(zip(keys, build_records(view, map(roots.get, keys), rows), strict=True))


class PageRows:
    """The rows the records of some root rows join, read from the store level by level
    (a ``derived.JoinRows`` for ``build_records``)."""

    def __init__(self, store: JoinStore, view: JoinedView, roots: Iterable[dict[str, Any]]
                 ) -> None:
        self._found: dict[tuple[Table, tuple[str, ...]], dict[LinkValue, list[Keyed]]] = {}
        levels: list[tuple[JoinLevel, list[dict[str, Any]]]] = [(view, list(roots))]
        while levels:
            level, rows = levels.pop()
            for joined in level.joined():
                edge = Edge.of(joined, level)
                values = _link_values(rows, edge.parent_columns)
                matched = store.matching_many(edge.table, edge.child_columns, values)
                self._found.setdefault((edge.table, edge.child_columns), {}).update(matched)
                levels.append((joined, [row for keyed in matched.values() for _, row in keyed]))

    def matching(self, table: Table, columns: tuple[str, ...],
                 values: tuple[Any, ...]) -> Sequence[Keyed]:
        """``(key, row)`` of every row of ``table`` whose ``columns`` equal ``values``."""
        return self._found.get((table, columns), {}).get(link_value(values), ())


def _link_values(rows: Iterable[dict[str, Any]], columns: tuple[str, ...]) -> set[LinkValue]:
    """The ``link_value``s of ``columns`` in ``rows`` (a NULL joins nothing)."""
    return {value for row in rows if (value := row_link_value(row, columns)) is not None}
