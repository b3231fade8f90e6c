"""From the events' text to typed columns, without losing a value on the way.

Each column is converted with ``try_cast`` to the type ``columns.spark_type`` gives it
(base64 for ``bytea``). A value Spark's type cannot hold — ``infinity`` as a timestamp,
``NaN`` in a ``numeric(p, s)``, a year past 9999 — would become ``NULL``; the job checks
for that (one aggregation, which also finds each such column's smallest lost text) and keeps
any such column as its exact text instead, with a warning naming the table, the column, how
many values and one example.

A job that writes the state once (``materialize``) need not check first: it writes the
typed columns and counts the values lost on the way, in the write itself
(``observed_typed_state``: Spark's ``observe``); only when one was lost, which is rare, it
checks and writes again. The check's pass over the state is saved (~1 s of 20 for 1 M
rows).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
        lost = {name: F.col(quoted(name)).isNotNull() & _converted(name, types[name]).isNull()
                for name in checked}
        found = state.agg(*[aggregate for number, name in enumerate(checked) for aggregate in (
            F.count(F.when(lost[name], 1)).alias(f"c{number}"),
            F.min(F.when(lost[name], F.col(quoted(name)))).alias(f"e{number}"))]).collect()[0]
        for number, name in enumerate(checked):
            if found[f"c{number}"]:
                example = found[f"e{number}"]
                kept.append(KeptAsText(name, types[name].simpleString(), int(found[f"c{number}"]),
                                       "" if example is None else str(example)))
                types[name] = StringType()
    return state.select(*_typed_columns(types), *passed), kept


def observed_typed_state(state: DataFrame, table: TableColumns, passed: Sequence[str] = ()
                         ) -> tuple[DataFrame, Callable[[], bool]]:
    """``state``'s columns converted as by ``typed_state``, no column kept as text, with
    the values lost counted while an action (the write) runs; and a function telling,
    after that action, whether any was (then ``typed_state`` decides and the frame is
    written again). A task run twice may count twice: only zero or not matters."""
    types, checked = _column_types(table)
    if not checked:
        return state.select(*_typed_columns(types), *passed), lambda: False
    taken = set(state.columns)
    prefix = next(f"_text{n}_" for n in range(len(taken) + 1)
                  if not any(column.startswith(f"_text{n}_") for column in taken))
    texts = {name: f"{prefix}{number}" for number, name in enumerate(checked)}
    converted = state.select(*_typed_columns(types), *passed,
                             *[F.col(quoted(name)).alias(text) for name, text in texts.items()])
    observation = Observation("values lost to their types")
    observed = converted.observe(observation, *[
        F.count(F.when(F.col(text).isNotNull() & F.col(quoted(name)).isNull(), 1))
        .alias(f"c{number}") for number, (name, text) in enumerate(texts.items())])

    def any_lost() -> bool:
        return any(count for count in observation.get.values())

    return observed.drop(*texts.values()), any_lost
