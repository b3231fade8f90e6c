"""The rows a joined view's records are built from, gathered per root partition in Spark.

Every table the view reads is materialized from the log below the end offsets noted
first (``state.text_state``: each column as the event's JSON text). The root's rows are
hashed by key into ``partitions`` groups (``_pid``); then, level by level (parents
first), each joined table's rows are joined on the ``on`` columns to the rows its parent
level has in each group, so a group holds its roots and exactly the rows their records
can read (a lookup table's row is repeated in every group that refers to it, not
broadcast whole). Join columns compare as their text, as the events carry them (join
columns of one type on both sides, as a foreign key has); a NULL joins nothing, as in
``derived.join_build``, which the tasks then apply in Python (``join_records``).

Each gathered row leaves Spark as one JSON line (``to_json`` of the state row, null
columns left out, plus ``_t``: the number of its table in ``JoinedTables.tables``, or
``ROOT`` for a root whose record is wanted), hashed by group into as many Spark
partitions: one task holds whole groups.

Memory: a task holds its groups' rows in a Python worker at once (``RowsInMemory``):
about ``ROOTS_PER_GROUP`` roots and everything they join to. The number of groups grows
with the roots, so a task's share stays bounded unless one root joins to very many rows
(every row joined to a root is in that root's group).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from derived import JoinedView

from .columns import quoted
from .materialize import KEY_COLUMN, OP_COLUMN, UPSERTS
from .source import EndOffsets, LogSource
from .state import TableHistory, text_state

GROUP_COLUMN = "_pid"
TABLE_FIELD = "_t"
LINE_COLUMN = "_line"
ROOT = -1
ROOTS_PER_GROUP = 20_000


@dataclass(frozen=True, slots=True)
class JoinedTables:
    """The tables of one joined view that have a schema record: ``tables[i]`` is
    ``(schema.table, its history, its topic)``; the root first."""

    view: JoinedView
    tables: tuple[tuple[str, TableHistory, str], ...]

    @classmethod
    def of(cls, view: JoinedView, histories: Mapping[str, TableHistory],
           source: LogSource) -> JoinedTables:
        names = [view.source, *sorted(f"{s}.{t}" for s, t in view.tables()
                                      if f"{s}.{t}" != view.source)]
        return cls(view, tuple((name, histories[name], source.topic(name))
                               for name in names if name in histories))

    @property
    def root(self) -> tuple[str, TableHistory, str] | None:
        """The root table, ``None`` when it has no schema record (no rows yet)."""
        first = self.tables[0] if self.tables else None
        return first if first is not None and first[0] == self.view.source else None

    def topics(self) -> list[str]:
        return [topic for _, _, topic in self.tables]


def note_ends(source: LogSource, tables: JoinedTables) -> dict[str, EndOffsets]:
    """Topic → its end offsets now (what ``gather`` reads below)."""
    return {topic: source.end_offsets(topic) for topic in tables.topics()}


@dataclass(frozen=True, slots=True)
class Gathered:
    """``lines``: one ``LINE_COLUMN`` per gathered row, partitioned by group;
    ``root_state``: the root table's state (``text_state``)."""

    lines: DataFrame
    root_state: DataFrame


def gather(spark: SparkSession, source: LogSource, tables: JoinedTables,
           ends: Mapping[str, EndOffsets], *, with_deletes: bool) -> Gathered | None:
    """The rows of every group (see the module docstring); ``None`` when the root table
    has no schema record. ``with_deletes`` also gives the roots whose last event is a
    delete (lines of ``_op`` ``d``), and the root's last truncate in ``root_state``, as
    ``current_state`` does."""
    root = tables.root
    if root is None:
        return None
    states = {name: text_state(spark, source, history, ends.get(topic, {}))
              for name, history, topic in tables.tables[1:]}
    root_name, root_history, root_topic = root
    root_state = text_state(spark, source, root_history, ends.get(root_topic, {}),
                            with_deletes=with_deletes)
    states.setdefault(root_name, root_state.where(F.col(OP_COLUMN).isin(*UPSERTS)))
    groups = _group_count(spark, root_state)
    roots = root_state.where(F.col(OP_COLUMN) != "t").withColumn(
        GROUP_COLUMN, F.pmod(F.hash(KEY_COLUMN), F.lit(groups)))
    number = {name: index for index, (name, _, _) in enumerate(tables.tables)}
    lines = [_lines(roots, ROOT)]
    gathered: dict[tuple[str, ...], DataFrame] = {
        (): roots.where(F.col(OP_COLUMN).isin(*UPSERTS))}
    for path, level in tables.view.levels():
        parent = gathered.get(path)
        if parent is None:
            continue
        for joined in level.joined():
            name = f"{joined.table[0]}.{joined.table[1]}"
            child = states.get(name)
            if child is None:
                continue
            rows = _joined_rows(parent, child, joined.join_on())
            if rows is not None:
                gathered[(*path, joined.name)] = rows
                lines.append(_lines(rows, number[name]))
    union = lines[0]
    for more in lines[1:]:
        union = union.unionByName(more)
    return Gathered(union.repartition(groups, GROUP_COLUMN).select(LINE_COLUMN), root_state)


def _group_count(spark: SparkSession, root_state: DataFrame) -> int:
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    return max(parallelism, math.ceil(root_state.count() / ROOTS_PER_GROUP))


def _joined_rows(parent: DataFrame, child: DataFrame,
                 on: Mapping[str, str]) -> DataFrame | None:
    """The rows of ``child`` joined to ``parent``'s in each group, once per group (a
    table joined at two levels comes once per level: the task keeps one);
    ``None`` when a join column is not a column (it is NULL: nothing joins)."""
    if any(p not in parent.columns or c not in child.columns for p, c in on.items()):
        return None
    pairs = list(on.items())
    wanted = parent.select(GROUP_COLUMN, *[F.col(quoted(p)).alias(f"_on{i}")
                                           for i, (p, _) in enumerate(pairs)]).distinct()
    condition = None
    for i, (_, column) in enumerate(pairs):
        equal = F.col(f"c.{quoted(column)}") == F.col(f"w._on{i}")
        condition = equal if condition is None else condition & equal
    joined = child.alias("c").join(wanted.alias("w"), condition, "inner")
    # ``wanted`` is distinct and a child row has one value of the join columns: each
    # child row comes once per group
    return joined.select(*[F.col(f"c.{quoted(c)}") for c in child.columns],
                         F.col(f"w.{GROUP_COLUMN}"))


def _lines(rows: DataFrame, table: int) -> DataFrame:
    columns = [c for c in rows.columns if c != GROUP_COLUMN]
    return rows.select(GROUP_COLUMN, F.to_json(F.struct(
        F.lit(table).alias(TABLE_FIELD), *[F.col(quoted(c)) for c in columns])
    ).alias(LINE_COLUMN))
