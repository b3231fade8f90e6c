"""Unchanged TOAST columns: where the values an update did not resend come from.

An update lists in ``unchanged`` the TOASTed columns PostgreSQL did not resend because
they did not change. They are not null: each still holds the value the row had, which
comes from the first of these that has it:

1. an earlier event of the same key: the newest one that sent the column (a sink: in
   its batch, since the key's last delete; Spark: in the key's history);
2. ``before``, the old row, when REPLICA IDENTITY FULL sent it in full;
3. the record the sink stores for the key: a verbatim copy of the column is read back,
   and fields derived only from such columns keep their stored values.

``fill_unchanged`` is that rule, and the only code that fills a column: coalescing
(``connectors.runtime.events``) and reading a batch (``connectors.changes``) call it with
1 and 2, ``complete_record`` with 3 (every sink's write path). A value ``after`` itself
holds for a listed column is not the column's value (the capture never writes one): a
source replaces it, else it is dropped and the column is missing.

Spark's materialization (``spark_pipelines.materialize``) applies step 1 as Spark SQL
over a key's history, where a Python call per row would cost too much; a column it
cannot fill is null. It reads no ``before`` and looks past deletes. The table of cases
in ``tests/unit/derived/toast_cases.py`` runs through both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any

from .apply import Record, apply_view_keeping, plan_unchanged, recover_columns
from .view import ViewDefinition


@dataclass(frozen=True, slots=True)
class Filled:
    """A row with its unchanged columns filled in; ``missing``: those nothing held."""

    row: dict[str, Any]
    missing: frozenset[str]


def fill_unchanged(after: dict[str, Any], unchanged: Iterable[str] | None,
                   *sources: Mapping[str, Any] | None) -> Filled:
    """``after`` with each column of ``unchanged`` taken from the first of ``sources``
    that holds it (``None`` sources are skipped): the newest earlier row of the key, then
    ``before``. ``after`` itself, not a copy, when nothing is unchanged."""
    if not unchanged:
        return Filled(after, frozenset())
    row = dict(after)
    missing: set[str] = set()
    for column in unchanged:
        for source in sources:
            if source is not None and column in source:
                row[column] = source[column]
                break
        else:
            row.pop(column, None)
            missing.add(column)
    return Filled(row, frozenset(missing))


@dataclass(frozen=True, slots=True)
class Completed:
    """A row's record with its unchanged TOAST columns taken from the stored record.

    ``record``: ``None`` when the view's filter drops the row (or on a ``problem``);
    ``problem``: why the record cannot be derived (the event is rejected with it);
    ``unfilled``: fields that keep the stored value but ``stored`` did not hold them
    (the record is written without them: a sink warns, a Redis hash copies them in
    its script).
    """

    record: Record | None
    problem: str | None = None
    unfilled: frozenset[str] = frozenset()


def complete_record(view: ViewDefinition | None, row: Mapping[str, Any], missing: Set[str],
                    stored: Mapping[str, Any] | None) -> Completed:
    """Step 3 of the fill, for every sink: the record ``view`` derives from ``row``, whose
    columns ``missing`` nothing earlier held, completed from ``stored`` (the record the
    sink holds for the key; ``None`` when it holds none or reads it later)."""
    if missing and stored:
        filled = fill_unchanged(dict(row), sorted(missing),
                                recover_columns(view, stored, missing))
        row, missing = filled.row, filled.missing
    plan = plan_unchanged(view, missing)
    if plan.problem is not None:
        return Completed(None, plan.problem)
    record = apply_view_keeping(view, row, plan.keep)
    if record is None or not plan.keep:
        return Completed(record)
    if not stored:
        return Completed(record, unfilled=plan.keep)
    record.update((name, stored[name]) for name in plan.keep if name in stored)
    return Completed(record)
