"""``ViewDefinition``: which table feeds which derived record, and what the record holds."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field, PrivateAttr, model_validator

from cdc.config import ConfigModel, Loc, raise_field_problems, template_validator
from cdc.config.fields import TableName

from .evaluate import Compiled, compile_expression
from .syntax import columns_of, parse_expression

KEY_PLACEHOLDERS = ("prefix", "topic", "schema", "table", "key")


def _expression(source: str) -> str:
    parse_expression(source)  # ExpressionError is a ValueError: pydantic reports it
    return source


def _name(value: str) -> str:
    if not value or value != value.strip():
        raise ValueError("expected a non-empty name without surrounding spaces")
    return value


def _target(value: str) -> str:
    if not (value[:1].isascii() and (value[:1].islower() or value[:1] == "_")
            and all(c.isascii() and (c.islower() or c.isdigit() or c == "_") for c in value)
            and len(value) <= 100):
        raise ValueError("expected a lowercase name of letters, digits and '_' (at most 100), "
                         "like 'orders_search'")
    return value


ExpressionText = Annotated[str, AfterValidator(_expression)]
FieldName = Annotated[str, AfterValidator(_name)]
TargetName = Annotated[str, AfterValidator(_target)]
KeyTemplate = Annotated[str, template_validator(KEY_PLACEHOLDERS, "product:{key.id}")]


class RowShape(ConfigModel):
    """What a record takes from one row: columns selected (``fields`` or ``exclude``) and
    renamed, computed fields, and which rows have a record at all (``filter``)."""

    fields: tuple[FieldName, ...] | None = Field(
        default=None, description="the columns to copy; null: every column")
    exclude: tuple[FieldName, ...] = Field(default=(), description="columns not to copy")
    rename: dict[FieldName, FieldName] = Field(default_factory=dict,
                                               description="column → field name")
    computed: dict[FieldName, ExpressionText] = Field(
        default_factory=dict, description="field → expression, like \"concat(first, ' ', last)\"")
    filter: ExpressionText | None = Field(
        default=None, description="keep rows where this is true, like \"status <> 'draft'\"")


class ViewDefinition(RowShape):
    """One derived record per row of ``source``: selected, renamed and computed fields.

    Selection (``fields`` or ``exclude``) and ``rename`` copy columns verbatim; each of
    ``computed`` is an expression over the source row (its original column names), added
    after the copies and winning over a copied field of the same name. A row for which
    ``filter`` is not true has no record: its document or key is deleted.
    """

    source: TableName = Field(description="the source table, 'schema.table'")
    target: TargetName = Field(description="the derived dataset: the index (alias) it feeds, "
                               "the dataset a Spark rebuild writes")
    key_template: KeyTemplate | None = Field(
        default=None, description="Redis key of a record, overriding the sink's key_template")

    _computed: dict[str, tuple[Compiled, frozenset[str]]] = PrivateAttr(default_factory=dict)
    _filter: Compiled | None = PrivateAttr(default=None)
    _filter_columns: frozenset[str] = PrivateAttr(default=frozenset())

    def model_post_init(self, context: Any, /) -> None:
        for name, source in self.computed.items():
            tree = parse_expression(source)
            self._computed[name] = (compile_expression(tree), columns_of(tree))
        if self.filter is not None:
            tree = parse_expression(self.filter)
            self._filter, self._filter_columns = compile_expression(tree), columns_of(tree)

    @model_validator(mode="after")
    def _consistent(self) -> ViewDefinition:
        problems: list[tuple[Loc, str, object]] = []
        if self.fields is not None and self.exclude:
            problems.append((("exclude",), "give fields or exclude, not both", None))
        for column in self.rename:
            if not self.copies(column):
                problems.append((("rename", column), "renames a column that is not copied; "
                                 "add it to fields (or remove it from exclude)", column))
        copied = [self.rename.get(c, c) for c in self.fields or ()] + [
            self.rename[c] for c in self.rename if self.fields is None]
        seen: set[str] = set()
        for name in copied:
            if name in seen:
                problems.append((("rename",), f"two columns become the field {name!r}", name))
            seen.add(name)
        if problems:
            raise_field_problems("ViewDefinition", problems)
        return self

    @property
    def table(self) -> tuple[str, str]:
        """``(schema, table)`` of the source."""
        schema, _, table = self.source.partition(".")
        return schema, table

    def copies(self, column: str) -> bool:
        """True if ``column`` is copied verbatim into the record."""
        return column in self.fields if self.fields is not None else column not in self.exclude

    def field_of(self, column: str) -> str | None:
        """The field holding ``column`` verbatim, or ``None`` if it is not copied (or a
        computed field of the same name replaces it)."""
        if not self.copies(column):
            return None
        name = self.rename.get(column, column)
        return None if name in self._computed else name

    def computed_fields(self) -> dict[str, tuple[Compiled, frozenset[str]]]:
        """Computed field → (its evaluator, the columns it reads)."""
        return self._computed

    def passes(self, row: dict[str, Any]) -> bool:
        """True if ``row`` passes the filter (always, without one)."""
        return self._filter is None or self._filter(row) is True

    def compiled_filter(self) -> Compiled | None:
        """The filter's evaluator (``None``: no filter)."""
        return self._filter

    @property
    def filter_columns(self) -> frozenset[str]:
        """The columns the filter reads."""
        return self._filter_columns
