"""Building the records of a joined view from rows: the one implementation.

``build_record`` shapes one root row (or a joined row, recursively) with its lookups and
nested lists, reading the joined tables through a :class:`JoinRows` (the connectors'
on-disk state store, the Spark rebuild's materialized tables, the tests' dictionaries),
so every producer of joined records makes the same ones.

Join values compare as the events carry them (typed JSON): join columns of one type on
both sides, as a foreign key has. A NULL in any join column joins nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from .apply import Record, view_applier
from .joins import JoinedTable, JoinLevel

Row = dict[str, Any]
Keyed = tuple[Row, Row]  # (key columns, row)

_NUMBERS = (bool, int, float)  # a tuple: a union built on every call costs more
_TIMESTAMP = re.compile(r"(-?\d{4,}-\d\d-\d\d[T ]\d\d:\d\d:\d\d)(\.\d+)?(.*)")


class JoinRows(Protocol):
    """Where the rows of the joined tables are read from."""

    def matching(self, table: tuple[str, str], columns: tuple[str, ...],
                 values: tuple[Any, ...]) -> Sequence[Keyed]:
        """``(key, row)`` of every row of ``table`` whose ``columns`` equal ``values``."""


def join_values(row: Mapping[str, Any], columns: Sequence[str]) -> tuple[Any, ...] | None:
    """The values of ``columns`` in ``row``; ``None`` when one is NULL or absent (a NULL
    joins nothing, as in SQL)."""
    if len(columns) == 1:  # the usual join: one column, no generator
        value = row.get(columns[0])
        return None if value is None else (value,)
    values = tuple(row.get(column) for column in columns)
    return None if any(value is None for value in values) else values


def sort_value(value: Any) -> tuple[Any, ...]:
    """How ``value`` orders in a nested list: numbers and numeric text by value,
    timestamps by time (fractions of any length), other text by code point, NULL last."""
    if value is None:
        return (3,)
    if isinstance(value, _NUMBERS):
        return (0, value)
    if isinstance(value, str):
        try:
            number = Decimal(value)
        except InvalidOperation:
            match = _TIMESTAMP.fullmatch(value)
            if match is None:
                return (1, value)
            whole, fraction, rest = match.groups()
            return (1, whole + (fraction or ".").ljust(7, "0") + rest)
        return (0, number) if number.is_finite() else (1, value)
    return (2, repr(value))


def build_record(level: JoinLevel, row: Row, rows: JoinRows) -> Record | None:
    """The record ``level`` derives from ``row`` with everything joined to it; ``None``
    when its filter rejects the row or a required lookup finds nothing."""
    return _build(_plan(level), row, rows, None)


def build_records(level: JoinLevel, roots: Iterable[Row | None], rows: JoinRows
                  ) -> list[Record | None]:
    """``build_record`` of each of ``roots`` (``None`` stays ``None``), a looked-up row
    built once for all of them: the records that look it up share that object (a
    customer's 10,000 orders, one customer record), so none may be changed in place."""
    plan = _plan(level)
    memo: _Memo = {}
    return [None if row is None else _build(plan, row, rows, memo) for row in roots]


@dataclass(frozen=True, slots=True)
class _Joined:
    """A joined table, its settings read once from the config model."""

    name: str
    table: tuple[str, str]
    parent_columns: tuple[str, ...]
    child_columns: tuple[str, ...]
    order_by: tuple[str, ...]
    required: bool
    level: _Level


@dataclass(frozen=True, slots=True)
class _Level:
    config: JoinLevel  # held, so the id it is cached under stays this level's
    apply: Callable[[Row], Record | None]  # the level's view (``apply_view``)
    lookups: tuple[_Joined, ...]
    nested: tuple[_Joined, ...]


_PLANS: dict[int, _Level] = {}
# a lookup's record of a joined row: (id of the lookup, id of the row) → (the row, record);
# the row is kept to check the id still names it; and by the values looked up
# (``_memo_key``): the same values match the same row within one ``build_records``
_Memo = dict[tuple[Any, ...], tuple[Row, Record | None]]


def _plan(level: JoinLevel) -> _Level:
    plan = _PLANS.get(id(level))
    if plan is None or plan.config is not level:
        plan = _PLANS[id(level)] = _Level(level, view_applier(level.view),
                                          tuple(map(_joined, level.lookups)),
                                          tuple(map(_joined, level.nested)))
    return plan


def _joined(joined: JoinedTable) -> _Joined:
    on = joined.join_on()
    return _Joined(joined.name, joined.table, tuple(on), tuple(on.values()),
                   joined.order_by, joined.required, _plan(joined))


def _build(level: _Level, row: Row, rows: JoinRows, memo: _Memo | None) -> Record | None:
    record = level.apply(row)
    if record is None:
        return None
    for lookup in level.lookups:
        found = _lookup(lookup, row, rows, memo)
        if found is None and lookup.required:
            return None
        record[lookup.name] = found
    for nested in level.nested:
        record[nested.name] = _nested(nested, row, rows, memo)
    return record


def _lookup(lookup: _Joined, row: Row, rows: JoinRows, memo: _Memo | None) -> Record | None:
    values = join_values(row, lookup.parent_columns)
    if values is None:
        return None
    asked = None if memo is None else _memo_key(lookup, values)
    if asked is not None:  # the same values looked up before: the same row, the same record
        seen = memo.get(asked)  # type: ignore[union-attr]
        if seen is not None:
            return seen[1]
    candidates = rows.matching(lookup.table, lookup.child_columns, values)
    if not candidates:
        return None
    # the first by key when several match (the on columns are meant to be unique)
    _, joined = (candidates[0] if len(candidates) == 1
                 else min(candidates, key=lambda keyed: _key_order(keyed[0])))
    if memo is None:
        return _build(lookup.level, joined, rows, None)
    seen = memo.get((id(lookup), id(joined)))
    if seen is not None and seen[0] is joined:
        record = seen[1]
    else:
        record = _build(lookup.level, joined, rows, memo)
        memo[id(lookup), id(joined)] = (joined, record)
    if asked is not None:
        memo[asked] = (joined, record)
    return record


def _memo_key(lookup: _Joined, values: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """What a lookup of ``values`` is remembered by: each value with its type (``1``,
    ``1.0`` and ``True`` are equal in Python, not in JSON); ``None`` for an object, a
    list or a float among them (looked up every time)."""
    if len(values) == 1:
        value = values[0]
        kind = type(value)
        if kind is dict or kind is list or kind is float:
            return None
        return (id(lookup), kind, value)
    if any(type(value) in _UNREMEMBERED for value in values):
        return None
    return (id(lookup), *((type(value), value) for value in values))


# not remembered by value: objects and lists are not hashable; -0.0 equals 0.0 in Python
# but not as JSON text (a join value of each may match other rows)
_UNREMEMBERED = (dict, list, float)


def _nested(nested: _Joined, row: Row, rows: JoinRows, memo: _Memo | None) -> list[Record]:
    values = join_values(row, nested.parent_columns)
    if values is None:
        return []
    children = rows.matching(nested.table, nested.child_columns, values)
    if len(children) > 1:
        children = _ordered(children, nested.order_by)
    records = []
    for _, child in children:
        record = _build(nested.level, child, rows, memo)
        if record is not None:
            records.append(record)
    return records


def _ordered(children: Sequence[Keyed], order: tuple[str, ...]) -> Sequence[Keyed]:
    """``children`` by their ``order`` columns' ``sort_value``s, then by key."""
    plain = _plain_numbers(children, order)
    if plain is not None:
        if sorted(plain) == plain:  # read in order already (items by line, by key)
            return children
        return [children[i] for i in sorted(range(len(plain)), key=plain.__getitem__)]
    return sorted(children, key=lambda keyed: (
        tuple(sort_value(keyed[1].get(column)) for column in order), _key_order(keyed[0])))


def _plain_numbers(children: Sequence[Keyed], order: tuple[str, ...]) -> list[Any] | None:
    """The one value each child sorts by when they are distinct numbers (not booleans,
    not NaN): ordering by them alone is then the full order, no tie for the key to break.
    That value is the one ``order`` column's, or without ``order_by`` the key's one
    column's. ``None`` otherwise (the usual list: ``line`` numbers)."""
    if len(order) == 1:
        column = order[0]
        values = [keyed[1].get(column) for keyed in children]
    elif not order and all(len(keyed[0]) == 1 for keyed in children):
        values = [next(iter(keyed[0].values())) for keyed in children]
    else:
        return None
    for value in values:
        kind = type(value)
        if kind is not int and (kind is not float or value != value):
            return None
    return values if len(set(values)) == len(values) else None


def _key_order(key: Row) -> tuple[tuple[Any, ...], ...]:
    return tuple(sort_value(value) for value in key.values())


class RowsInMemory:
    """A ``JoinRows`` over dictionaries of rows, indexed on first use (the Spark
    rebuild's partitions, tests)."""

    def __init__(self, tables: Mapping[tuple[str, str], Sequence[Keyed]]) -> None:
        self._tables = tables
        self._indexes: dict[tuple[tuple[str, str], tuple[str, ...]],
                            dict[tuple[Any, ...], list[Keyed]]] = {}

    def matching(self, table: tuple[str, str], columns: tuple[str, ...],
                 values: tuple[Any, ...]) -> Sequence[Keyed]:
        index = self._indexes.get((table, columns))
        if index is None:
            index = {}
            for keyed in self._tables.get(table, ()):
                found = join_values(keyed[1], columns)
                if found is not None:
                    index.setdefault(found, []).append(keyed)
            self._indexes[table, columns] = index
        return index.get(values, ())


__all__ = ["JoinRows", "Keyed", "RowsInMemory", "build_record", "build_records",
           "join_values", "sort_value"]
