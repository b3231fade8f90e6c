"""Joined views: one derived record per row of a root table, holding rows of other tables.

A :class:`JoinedView` is the root level: its table gives one document (or cache entry)
per row, shaped like a ``ViewDefinition`` (fields, exclude, rename, computed, filter).
Each level may hold

- ``lookups``: many-to-one, the one row of another table whose ``on`` columns equal
  this row's (the order's customer), embedded as an object (``null`` when there is none;
  ``required: true`` drops the row instead: a root then has no record);
- ``nested``: one-to-many, every row of another table whose ``on`` columns equal this
  row's (the order's items), as a list ordered by ``order_by`` then the child's key.

``on`` maps this level's columns to the joined table's columns, like
``{customer_id: id}`` for a lookup or ``{id: order_id}`` for a nested list; or it is
``foreign_key``: the one foreign key between the two tables gives the columns (from this
level's table to a lookup's, from a nested list's table to this level's), read from the
database when a command starts (``connectors.joins.foreign_keys``). Levels nest
to any depth (order → items → product). :mod:`derived.join_build` builds the records;
the streaming connectors, the Spark rebuild and ``cdc reconcile`` all use it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, model_validator

from cdc.config import ConfigModel, Loc, raise_field_problems
from cdc.config.fields import TableName

from .view import FieldName, KeyTemplate, RowShape, TargetName, ViewDefinition


class JoinLevel(RowShape):
    """What one level of a joined record holds: its own columns (computed fields read
    this level's row) and its joined tables. A nested row that fails ``filter`` is left
    out of its list; a lookup row that fails it counts as missing."""

    source: TableName = Field(description="the table of this level, 'schema.table'")
    lookups: tuple[JoinedTable, ...] = Field(
        default=(), description="many-to-one: one row of another table as an object")
    nested: tuple[JoinedTable, ...] = Field(
        default=(), description="one-to-many: the rows of another table as a list")

    _view: ViewDefinition | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        self._view = ViewDefinition(
            source=self.source, target="joined", fields=self.fields, exclude=self.exclude,
            rename=self.rename, computed=self.computed, filter=self.filter)

    @property
    def view(self) -> ViewDefinition:
        """This level's own columns as a ``ViewDefinition`` (``apply_view`` shapes them)."""
        assert self._view is not None
        return self._view

    @property
    def table(self) -> tuple[str, str]:
        """``(schema, table)`` of this level."""
        return self.view.table

    def joined(self) -> Iterator[JoinedTable]:
        """The lookups, then the nested lists, of this level."""
        yield from self.lookups
        yield from self.nested

    def _level_problems(self) -> list[tuple[Loc, str, object]]:
        problems: list[tuple[Loc, str, object]] = []
        own = {self.view.field_of(c) for c in (self.fields or ())} | set(self.computed)
        own |= set(self.rename.values())
        names: set[str] = set()
        for place, part in (("lookups", self.lookups), ("nested", self.nested)):
            for number, joined in enumerate(part):
                if joined.name in names or joined.name in own:
                    problems.append(((place, number, "name"), f"{joined.name!r} is already "
                                     "a field of this level; give the joined table another "
                                     "name", joined.name))
                names.add(joined.name)
                if place == "lookups" and joined.order_by:
                    problems.append(((place, number, "order_by"), "a lookup embeds one row; "
                                     "order_by is for nested lists", joined.order_by))
                if place == "nested" and joined.required:
                    problems.append(((place, number, "required"), "only a lookup can be "
                                     "required; an empty nested list is an empty list",
                                     joined.required))
        return problems


class JoinedTable(JoinLevel):
    """A table joined into its parent level, as ``name`` (a lookup or a nested list)."""

    name: FieldName = Field(description="the field of the parent that holds it")
    on: dict[FieldName, FieldName] | Literal["foreign_key"] = Field(
        description="parent column → this table's column, like {customer_id: id}; rows "
        "join where every pair is equal (NULL joins nothing). Or foreign_key: the columns "
        "of the one foreign key between the two tables, read from the database at start")
    order_by: tuple[FieldName, ...] = Field(
        default=(), description="nested lists: the columns that order the list (then the "
        "key); numbers and numeric text by value, other text by code point, NULL last")
    required: bool = Field(
        default=False, description="lookups: with no matching row the parent has no "
        "record (a root: its document is deleted; a nested row: left out of its list); "
        "false: the field is null")

    @model_validator(mode="before")
    @classmethod
    def _on_as_written(cls, data: Any) -> Any:
        """YAML 1.1 reads an unquoted ``on:`` key as the boolean true: take it as ``on``."""
        if isinstance(data, dict) and True in data and "on" not in data:
            data = {("on" if key is True else key): value for key, value in data.items()}
        return data

    def join_on(self) -> dict[str, str]:
        """``on`` as parent column → this table's column (resolved, if it was
        ``foreign_key``)."""
        if isinstance(self.on, str):
            raise ValueError(f"the join of {self.source} as {self.name!r} is on: foreign_key, "
                             "not yet read from the database (connectors.joins.foreign_keys)")
        return self.on

    @model_validator(mode="after")
    def _consistent_table(self) -> JoinedTable:
        problems = self._level_problems()
        if isinstance(self.on, dict) and not self.on:
            problems.append((("on",), "name at least one pair of columns, like "
                             "{customer_id: id}, or write foreign_key", self.on))
        if problems:
            raise_field_problems("JoinedTable", problems)
        return self


class JoinedView(JoinLevel):
    """One record per row of ``source`` written to ``target``, with its joined tables."""

    target: TargetName = Field(description="the index (alias) or dataset the records feed")
    key_template: KeyTemplate | None = Field(
        default=None, description="Redis key of a record, overriding the sink's key_template")

    @model_validator(mode="after")
    def _consistent_view(self) -> JoinedView:
        problems = self._level_problems()
        if problems:
            raise_field_problems("JoinedView", problems)
        return self

    def levels(self) -> Iterator[tuple[tuple[str, ...], JoinLevel]]:
        """Every level with its path of joined names (the root's is empty), parents first."""
        pending: list[tuple[tuple[str, ...], JoinLevel]] = [((), self)]
        while pending:
            path, level = pending.pop(0)
            yield path, level
            pending.extend(((*path, joined.name), joined) for joined in level.joined())

    def tables(self) -> set[tuple[str, str]]:
        """Every table this view reads."""
        return {level.table for _, level in self.levels()}


JoinLevel.model_rebuild()
JoinedTable.model_rebuild()
JoinedView.model_rebuild()


class JoinSettings(ConfigModel):
    """The joined views of a sink (OpenSearch, Redis) and where their state is kept."""

    joins: tuple[JoinedView, ...] = Field(
        default=(), description="joined views: one record per row of a root table holding "
        "rows of other tables (lookups, nested lists), kept exact from an on-disk state store")
    join_state_dir: Path = Field(
        default=Path(".distributary/joins"), description="where joined views keep their "
        "state (one SQLite file per connector); keep it on a local disk that survives restarts")


def join_problems(views: tuple[ViewDefinition, ...], joins: tuple[JoinedView, ...]
                  ) -> list[tuple[Loc, str, object]]:
    """What is wrong with a sink's ``joins`` beside its ``views``: each joined view has its
    own target and root table, and no plain view reads a joined view's root table (its
    records would be mistaken for the joined ones)."""
    problems: list[tuple[Loc, str, object]] = []
    targets = {view.target: f"views[{number}]" for number, view in enumerate(views)}
    plain = {view.source: number for number, view in enumerate(views)}
    roots: dict[str, int] = {}
    for number, join in enumerate(joins):
        if join.target in targets:
            problems.append((("joins", number, "target"), f"{targets[join.target]} already "
                             f"writes {join.target!r}; give each view its own target",
                             join.target))
        targets[join.target] = f"joins[{number}]"
        if join.source in plain:
            problems.append((("joins", number, "source"), f"views[{plain[join.source]}] also "
                             f"reads {join.source}; a joined view's root table feeds only it "
                             "(use a second connector for the plain view)", join.source))
        if join.source in roots:
            problems.append((("joins", number, "source"), f"joins[{roots[join.source]}] has "
                             f"the same root table {join.source}; use a second connector",
                             join.source))
        roots.setdefault(join.source, number)
    return problems
