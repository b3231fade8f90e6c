"""From the events' text to typed columns, without losing a value on the way.

Each column is converted with ``try_cast`` to the type ``columns.spark_type`` gives it
(base64 for ``bytea``). A value Spark's type cannot hold — ``infinity`` as a timestamp,
``NaN`` in a ``numeric(p, s)``, a year past 9999 — would become ``NULL``; the job checks
for that (one aggregation, which also finds each such column's smallest lost text) and keeps
any such column as its exact text instead, with a warning naming the table, the column, how
many values and one example.

A job that writes the state once (``materialize``) need not check first: it writes the
typed columns and finds the values lost on the way, counts and smallest texts, in the
write itself (``observed_typed_state``: Spark's ``observe``); only when one was lost,
which is rare, it writes again with those columns as text (``typed_as_found``). The
check's pass over the state is saved (~1 s of 20 for 1 M rows), and when a value was
lost, the check's pass before the second write too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, DataType, StringType

from .columns import TableColumns, quoted, spark_type


@dataclass(frozen=True, slots=True)
class KeptAsText:
    """A column whose values did not all fit its Spark type."""

    column: str
    spark_type: str
    values: int
    example: str

    def warning(self, table: str) -> str:
        return (f"{table}.{self.column}: {self.values} value(s) do not fit Spark's "
                f"{self.spark_type} (for example {self.example!r}); the column is written "
                "as its exact text instead")


def _converted(name: str, data_type: DataType) -> Column:
    text = F.col(quoted(name))
    if isinstance(data_type, BinaryType):
        return F.try_to_binary(text, F.lit("base64"))
    return text.try_cast(data_type)


def _column_types(table: TableColumns) -> tuple[dict[str, DataType], list[str]]:
    """Each column's Spark type, and the columns whose values are converted (not text)."""
    types = {c.name: spark_type(c) for c in table.columns}
    return types, [name for name, t in types.items() if not isinstance(t, StringType)]


def _typed_columns(types: dict[str, DataType]) -> list[Column]:
    """The select list converting each column to its type (text stays as it is)."""
    return [F.col(quoted(name)) if isinstance(t, StringType) else _converted(name, t).alias(name)
            for name, t in types.items()]


def typed_state(state: DataFrame, table: TableColumns,
                passed: Sequence[str] = ()) -> tuple[DataFrame, list[KeptAsText]]:
    """``state``'s table columns converted, then the columns ``passed`` as they are (the
    other ``_`` columns dropped); and the columns kept as text because some value did
    not fit."""
    types, checked = _column_types(table)
    kept: list[KeptAsText] = []
    if checked:
        found = state.agg(*_lost_aggregates(
            {name: F.col(quoted(name)) for name in checked},
            {name: _converted(name, types[name]) for name in checked})).collect()[0]
        kept = _kept_as_text(found.asDict(), checked, types)
    return typed_as_found(state, table, kept, passed), kept


def typed_as_found(state: DataFrame, table: TableColumns, kept: Sequence[KeptAsText],
                   passed: Sequence[str] = ()) -> DataFrame:
    """``state``'s table columns converted but for the ``kept`` ones (their text), then
    the columns ``passed`` as they are."""
    types, _ = _column_types(table)
    for column in kept:
        types[column.column] = StringType()
    return state.select(*_typed_columns(types), *passed)


def _lost_aggregates(texts: dict[str, Column], converted: dict[str, Column]) -> list[Column]:
    """For each column (by number, in ``texts``' order): how many of its values were lost
    to their type (``c<n>``), and the smallest such text (``e<n>``)."""
    aggregates = []
    for number, (name, text) in enumerate(texts.items()):
        lost = text.isNotNull() & converted[name].isNull()
        aggregates += [F.count(F.when(lost, 1)).alias(f"c{number}"),
                       F.min(F.when(lost, text)).alias(f"e{number}")]
    return aggregates


def _kept_as_text(found: dict[str, Any], checked: Sequence[str],
                  types: dict[str, DataType]) -> list[KeptAsText]:
    """The columns ``_lost_aggregates`` found values lost in."""
    return [KeptAsText(name, types[name].simpleString(), int(found[f"c{number}"]),
                       "" if found[f"e{number}"] is None else str(found[f"e{number}"]))
            for number, name in enumerate(checked) if found[f"c{number}"]]


def observed_typed_state(state: DataFrame, table: TableColumns, passed: Sequence[str] = ()
                         ) -> tuple[DataFrame, Callable[[], list[KeptAsText]]]:
    """``state``'s columns converted as by ``typed_state``, no column kept as text, with
    the values lost found while an action (the write) runs; and a function giving, after
    that action, the columns that lost any (then ``typed_as_found`` with them is written
    instead). A task run twice may count its values twice in ``KeptAsText.values``."""
    types, checked = _column_types(table)
    if not checked:
        return state.select(*_typed_columns(types), *passed), list
    taken = set(state.columns)
    prefix = next(f"_text{n}_" for n in range(len(taken) + 1)
                  if not any(column.startswith(f"_text{n}_") for column in taken))
    texts = {name: f"{prefix}{number}" for number, name in enumerate(checked)}
    converted = state.select(*_typed_columns(types), *passed,
                             *[F.col(quoted(name)).alias(text) for name, text in texts.items()])
    observation = Observation("values lost to their types")
    observed = converted.observe(observation, *_lost_aggregates(
        {name: F.col(text) for name, text in texts.items()},
        {name: F.col(quoted(name)) for name in checked}))

    def kept_as_text() -> list[KeptAsText]:
        return _kept_as_text(observation.get, checked, types)

    return observed.drop(*texts.values()), kept_as_text
