"""The SQL that makes PostgreSQL itself join a joined view's rows: the reconcile oracle.

``joined_query`` builds one statement over the root table that returns, per root row,
one JSON *node*: ``[[column text, …], <joined>, …]`` — the row's columns as the text
their type's output function makes (``format('%s', …)``: what the capture reads and
decodes with its codecs, not a cast to ``text``, which differs for ``boolean``,
``char(n)``, ``inet``…), then, in ``JoinLevel.joined()`` order, each lookup's node (or
``null``) and each nested list as an array of nodes. Lookups are ``LEFT JOIN LATERAL
(… ORDER BY <key> LIMIT 1)`` (the first matching row by key); nested lists are
``json_agg(… ORDER BY …)`` in ``derived.join_build.sort_value`` order: the ``order_by``
columns, then the child's key columns, each NULL last, numbers (and numeric text) by
value, other text by code point (``COLLATE "C"``). Levels nest to any depth.

The join membership and the list order come from SQL; filters, computed fields and the
rest of a level's shape are applied in Python (``join_source``), as ``build_record``
applies them, because expressions cannot run in SQL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import count

from psycopg import sql

from derived import JoinedTable, JoinedView, JoinLevel

# type OIDs ordered by their own value (as their event values order under sort_value):
# int2, int4, int8, oid, float4, float8, numeric, bool, date, time, timestamp(tz)
NATIVE_ORDER = frozenset({21, 23, 20, 26, 700, 701, 1700, 16, 1082, 1083, 1114, 1184})
# text Python's Decimal() reads as a finite number: sort_value orders it by value
# the one column of a lateral subquery (unlike any table's, so a row filter's bare
# column names still mean the table's)
NODE = sql.Identifier("_distributary_reconcile_node")
NUMERIC_TEXT = r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"


@dataclass(frozen=True, slots=True)
class TableColumns:
    """What the query needs of one table: its published columns in event order, their
    type OIDs, its event key columns, and the publication's row filter (SQL text from the
    catalog, or ``None``)."""

    columns: tuple[str, ...]
    types: tuple[int, ...]
    key: tuple[str, ...]
    row_filter: str | None = None

    def type_of(self, column: str) -> int:
        """The type OID of ``column`` (0 when the table has no such column)."""
        try:
            return self.types[self.columns.index(column)]
        except ValueError:
            return 0


class JoinQueryError(ValueError):
    """The view names a table or column the catalog does not have."""


def output_text(alias: sql.Identifier, column: str) -> sql.Composable:
    """``column`` of ``alias`` as its type's output text (``NULL`` stays ``NULL``)."""
    value = sql.SQL("{}.{}").format(alias, sql.Identifier(column))
    return sql.SQL("CASE WHEN {v} IS NULL THEN NULL ELSE format('%s', {v}) END").format(
        v=value)


def sort_keys(alias: sql.Identifier, column: str, type_oid: int) -> list[sql.Composable]:
    """``ORDER BY`` items ordering ``column`` as ``sort_value`` orders its event value."""
    value = sql.SQL("{}.{}").format(alias, sql.Identifier(column))
    if type_oid in NATIVE_ORDER:
        return [sql.SQL("{} ASC NULLS LAST").format(value)]
    text = sql.SQL("format('%s', {})").format(value)
    numeric = sql.SQL("{} ~ {}").format(text, sql.Literal(NUMERIC_TEXT))
    return [sql.SQL("CASE WHEN {v} IS NULL THEN 3 WHEN {n} THEN 0 ELSE 1 END").format(
                v=value, n=numeric),
            sql.SQL("CASE WHEN {v} IS NOT NULL AND {n} THEN {t}::numeric END").format(
                v=value, n=numeric, t=text),
            # numbers equal by value tie, as their Decimals do
            sql.SQL('CASE WHEN NOT {n} THEN {t} END COLLATE "C"').format(n=numeric, t=text)]


def key_order(alias: sql.Identifier, table: TableColumns) -> list[sql.Composable]:
    """``ORDER BY`` items of the table's key, as ``build_record`` orders keys."""
    return [item for column in table.key
            for item in sort_keys(alias, column, table.type_of(column))]


class _Builder:
    """Builds the nodes of one query; every table reference gets an alias of its own."""

    def __init__(self, tables: Mapping[tuple[str, str], TableColumns]) -> None:
        self._tables = tables
        self._aliases = count()

    def table(self, level: JoinLevel) -> TableColumns:
        found = self._tables.get(level.table)
        if found is None:
            raise JoinQueryError(f"table {level.source} is not in the catalog (or not "
                                 "published)")
        return found

    def alias(self, kind: str) -> sql.Identifier:
        return sql.Identifier(f"{kind}{next(self._aliases)}")

    def level(self, level: JoinLevel, alias: sql.Identifier
              ) -> tuple[sql.Composable, list[sql.Composable]]:
        """The node expression of ``level``'s row ``alias`` and the lateral joins it reads."""
        table = self.table(level)
        columns = sql.SQL("json_build_array({})").format(
            sql.SQL(", ").join(output_text(alias, column) for column in table.columns))
        parts: list[sql.Composable] = [columns]
        laterals: list[sql.Composable] = []
        for joined in level.lookups:
            name = self.alias("l")
            laterals.append(sql.SQL("LEFT JOIN LATERAL ({}) AS {} ON true").format(
                self.lookup(joined, alias), name))
            parts.append(sql.SQL("{}.{}").format(name, NODE))
        for joined in level.nested:
            name = self.alias("n")
            laterals.append(sql.SQL("LEFT JOIN LATERAL ({}) AS {} ON true").format(
                self.nested(joined, alias), name))
            parts.append(sql.SQL("{}.{}").format(name, NODE))
        return sql.SQL("json_build_array({})").format(sql.SQL(", ").join(parts)), laterals

    def _from(self, joined: JoinedTable, parent: sql.Identifier
              ) -> tuple[sql.Identifier, sql.Composable, sql.Composable]:
        """The alias, node and ``FROM … WHERE …`` of ``joined``'s rows matching ``parent``."""
        table = self.table(joined)
        alias = self.alias("t")
        node, laterals = self.level(joined, alias)
        conditions: list[sql.Composable] = [
            sql.SQL("{}.{} = {}.{}").format(alias, sql.Identifier(child), parent,
                                            sql.Identifier(column))
            for column, child in joined.join_on().items()]
        if table.row_filter:
            conditions.append(sql.SQL("({})").format(sql.SQL(table.row_filter)))
        source = sql.SQL("FROM {} AS {} {} WHERE {}").format(
            sql.Identifier(*joined.table), alias, sql.SQL(" ").join(laterals),
            sql.SQL(" AND ").join(conditions))
        return alias, node, source

    def lookup(self, joined: JoinedTable, parent: sql.Identifier) -> sql.Composable:
        alias, node, source = self._from(joined, parent)
        return sql.SQL("SELECT {} AS {} {} ORDER BY {} LIMIT 1").format(
            node, NODE, source, sql.SQL(", ").join(key_order(alias, self.table(joined))))

    def nested(self, joined: JoinedTable, parent: sql.Identifier) -> sql.Composable:
        alias, node, source = self._from(joined, parent)
        table = self.table(joined)
        order = [item for column in joined.order_by
                 for item in sort_keys(alias, column, table.type_of(column))]
        order += key_order(alias, table)
        return sql.SQL("SELECT coalesce(json_agg({} ORDER BY {}), '[]'::json) AS {} {}"
                       ).format(node, sql.SQL(", ").join(order), NODE, source)


def check_columns(view: JoinedView, tables: Mapping[tuple[str, str], TableColumns]) -> None:
    """``JoinQueryError`` when a level's table or a join column is not published."""
    for _, level in view.levels():
        table = tables.get(level.table)
        if table is None:
            raise JoinQueryError(f"table {level.source} is not in the catalog (or not "
                                 "published)")
        for joined in level.joined():
            child = tables.get(joined.table)
            on = joined.join_on()
            missing = [f"{level.source}.{c}" for c in on if c not in table.columns]
            if child is not None:
                missing += [f"{joined.source}.{c}" for c in (*on.values(), *joined.order_by)
                            if c not in child.columns]
            if missing:
                raise JoinQueryError(f"joined view {view.target}: join or order_by column(s) "
                                     f"{', '.join(missing)} not published")


def joined_query(view: JoinedView, tables: Mapping[tuple[str, str], TableColumns],
                 keys: Sequence[Sequence[str]] | None = None) -> sql.Composed:
    """One row per root row (ordered by its key): the root key's column texts, then the
    root's node as JSON text (see the module docstring). ``keys``: only the root rows
    whose key columns have these output texts (``None``: every row)."""
    check_columns(view, tables)
    builder = _Builder(tables)
    root = builder.table(view)
    alias = builder.alias("r")
    node, laterals = builder.level(view, alias)
    conditions: list[sql.Composable] = []
    if root.row_filter:
        conditions.append(sql.SQL("({})").format(sql.SQL(root.row_filter)))
    if keys is not None:
        if not keys:
            conditions.append(sql.SQL("false"))
        else:
            conditions.append(sql.SQL("({}) IN ({})").format(
                sql.SQL(", ").join(sql.SQL("{}.{}").format(alias, sql.Identifier(c))
                                   for c in root.key),
                sql.SQL(", ").join(
                    sql.SQL("({})").format(sql.SQL(", ").join(map(sql.Literal, key)))
                    for key in keys)))
    where = sql.SQL(" WHERE {}").format(sql.SQL(" AND ").join(conditions)) \
        if conditions else sql.SQL("")
    return sql.SQL("SELECT {}, ({})::text FROM {} AS {} {}{} ORDER BY {}").format(
        sql.SQL(", ").join(output_text(alias, column) for column in root.key), node,
        sql.Identifier(*view.table), alias, sql.SQL(" ").join(laterals), where,
        sql.SQL(", ").join(sql.SQL("{}.{}").format(alias, sql.Identifier(c))
                           for c in root.key))


__all__ = ["JoinQueryError", "TableColumns", "check_columns", "joined_query", "key_order",
           "output_text", "sort_keys"]
