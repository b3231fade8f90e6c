"""Applying a view to a row, also when some columns were not resent (unchanged TOAST).

``apply_view`` is the one implementation of a view: the streaming sinks call it per event
and a Spark rebuild calls it per row, so both produce the same records. Without a view
(``None``) the record is the row as it is.

An update may leave big (TOASTed) columns out: PostgreSQL did not resend them because
they did not change. What nothing earlier held (``derived.toast``), a sink keeps from
the stored record: ``plan_unchanged`` says which fields to keep, ``recover_columns``
reads columns back from a stored record where the view copied them verbatim.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass
from typing import Any

from .values import json_value
from .view import ViewDefinition

Record = dict[str, Any]


def apply_view(view: ViewDefinition | None, row: Mapping[str, Any]) -> Record | None:
    """The record ``view`` derives from ``row``, or ``None`` if the filter rejects it."""
    return apply_view_keeping(view, row, frozenset())


def view_applier(view: ViewDefinition | None) -> Callable[[dict[str, Any]], Record | None]:
    """``apply_view`` of ``view`` as one function of a row (a dict), for a caller that
    applies the same view to many rows."""
    if view is None:
        return dict
    applier = _applier(view)
    return lambda row: applier.apply(row, _NOTHING_KEPT)


_NOTHING_KEPT: frozenset[str] = frozenset()


def apply_view_keeping(view: ViewDefinition | None, row: Mapping[str, Any],
                       keep: Set[str]) -> Record | None:
    """Like ``apply_view``, leaving out the computed fields named in ``keep`` (a sink
    takes those from the stored record)."""
    if view is None:
        return dict(row)
    return _applier(view).apply(row if isinstance(row, dict) else dict(row), keep)


class _Applier:
    """A view's settings read once (a pydantic model's private attributes are slow to
    reach on every row)."""

    __slots__ = ("computed", "exclude", "fields", "filter", "rename", "view")

    def __init__(self, view: ViewDefinition) -> None:
        self.view = view  # held, so the id it is cached under stays this view's
        self.fields = view.fields
        self.exclude = view.exclude
        self.rename = view.rename
        self.computed = [(name, evaluate) for name, (evaluate, _)
                         in view.computed_fields().items()]
        self.filter = view.compiled_filter()

    def apply(self, source: dict[str, Any], keep: Set[str]) -> Record | None:
        if self.filter is not None and self.filter(source) is not True:
            return None
        rename = self.rename
        if not rename:  # the usual view: columns copied as they are named
            if self.fields is not None:
                record = {column: source[column] for column in self.fields if column in source}
            elif self.exclude:  # the row less a few columns: copied whole, then dropped
                record = source.copy()
                for column in self.exclude:
                    record.pop(column, None)
            else:
                record = source.copy()
        elif self.fields is not None:
            record = {}
            for column in self.fields:
                if column in source:
                    record[rename.get(column, column)] = source[column]
        else:
            record = {}
            excluded = self.exclude
            for column, value in source.items():
                if column not in excluded:
                    record[rename.get(column, column)] = value
        for name, evaluate in self.computed:
            if name not in keep:
                record[name] = json_value(evaluate(source))
            else:
                record.pop(name, None)
        return record


_APPLIERS: dict[int, _Applier] = {}


def _applier(view: ViewDefinition) -> _Applier:
    applier = _APPLIERS.get(id(view))
    if applier is None or applier.view is not view:
        applier = _APPLIERS[id(view)] = _Applier(view)
    return applier


@dataclass(frozen=True, slots=True)
class UnchangedPlan:
    """What a sink does for columns an update did not resend.

    ``keep``: fields whose stored value stays (they derive only from such columns).
    ``problem``: why the record cannot be derived at all (a field or the filter mixes
    such columns with resent ones); the event is then rejected with this reason.
    """

    keep: frozenset[str]
    problem: str | None = None


def plan_unchanged(view: ViewDefinition | None, missing: Set[str]) -> UnchangedPlan:
    """The plan for a row lacking the columns ``missing``."""
    if not missing:
        return UnchangedPlan(frozenset())
    if view is None:
        return UnchangedPlan(frozenset(missing))
    keep = {name for column in missing if (name := view.field_of(column)) is not None}
    problems: list[str] = []
    for name, (_, reads) in view.computed_fields().items():
        absent = reads & missing
        if absent and absent == reads:
            keep.add(name)
        elif absent:
            problems.append(f"computed field {name!r} reads {_names(absent)}, which this update "
                            "did not resend (unchanged TOAST), together with "
                            f"{_names(reads - absent)}")
    absent = view.filter_columns & missing
    if absent:
        problems.append(f"the filter reads {_names(absent)}, which this update did not resend "
                        "(unchanged TOAST)")
    if problems:
        fix = ("; copy those columns verbatim into the view, or set REPLICA IDENTITY FULL "
               "on the table so updates carry the old row")
        return UnchangedPlan(frozenset(keep), "; ".join(problems) + fix)
    return UnchangedPlan(frozenset(keep))


def recover_columns(view: ViewDefinition | None, stored: Mapping[str, Any],
                    columns: Set[str]) -> dict[str, Any]:
    """The values of ``columns`` that ``stored`` (a record this view made) holds verbatim."""
    recovered: dict[str, Any] = {}
    for column in columns:
        name = column if view is None else view.field_of(column)
        if name is not None and name in stored:
            recovered[column] = stored[name]
    return recovered


def _names(columns: Set[str]) -> str:
    return ", ".join(repr(c) for c in sorted(columns))
