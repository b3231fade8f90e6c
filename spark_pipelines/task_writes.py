"""A rebuild's writes, made by the Spark tasks that hold the rows, not by the driver.

``write_from_tasks`` runs one task per partition of the state (``mapPartitionsWithIndex``
over the rows as JSON text, ``DataFrame.toJSON``: the cheapest way from the JVM into a
Python worker, one string per row, no pickled rows). Each task builds the connector's own
sink from what the ``SinkRecipe`` carries (the config travels as its values and is
validated again there: ``ShippedConfig``), opens it on its first row, writes the
partition's rows as the sink's events (``sink_events``) in batches, closes it, and
returns one ``TaskCount``: rows per target (alias, or keys written), deletes, the
rejections (stopping at the first batch that has any) and where it ran (stage,
partition, task attempt, process). The driver only collects these few
counts: no row passes through it. ``spread`` first hashes the rows by key over as many
partitions as the cluster runs tasks at once, so every core writes and no task gets a
skewed share.

While a task writes, the objects its Python worker held before (modules, Spark's and the
connectors' imports: some 10^5) are frozen out of the cyclic garbage collector
(``gc.freeze``) and put back when it ends: a batch of events lives long enough to be
promoted to the oldest generation, so full collections come every few thousand rows and
each one would walk all of them — a fifth of a Redis rebuild's time, measured. Objects
the task makes are collected as usual.

The tasks import the connectors: locally, the workers run the driver's interpreter; on a
cluster, the session ships Distributary's packages to the executors as a zip, and their
Python needs only the third-party dependencies (``session``).
"""

from __future__ import annotations

import gc
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from connectors.contract import Sink, SinkEvent

from .materialize import KEY_COLUMN
from .sink_events import StateRow, event_batches
from .state import ReplayError, TableHistory

C = TypeVar("C", bound=BaseModel)
Targets = Callable[[SinkEvent], Iterable[str]]


@dataclass(frozen=True, slots=True)
class ShippedConfig(Generic[C]):
    """A sink config on its way to the executors: its values, validated again there (a
    view's compiled expressions are functions, which plain pickle refuses)."""

    model: type[C]
    values: dict[str, Any]

    @classmethod
    def of(cls, config: C) -> ShippedConfig[C]:
        return cls(type(config), config.model_dump())

    def load(self) -> C:
        """The config again, as the driver had it."""
        return self.model.model_validate(self.values)


class SinkRecipe(Protocol):
    """What a task needs to build its sink (picklable)."""

    def build(self) -> tuple[Sink, Targets]:
        """A new, unopened sink, and what each written event counts towards."""


@dataclass(frozen=True, slots=True)
class TaskCount:
    """What one task wrote, and where it ran."""

    stage: int
    partition: int
    attempt: int  # the task attempt id (unique within the application)
    pid: int  # the Python worker's process
    rows: int
    targets: dict[str, int]
    deleted: int
    rejected: int
    example: str | None = None  # "key …: reason" of the first rejection


@dataclass(frozen=True, slots=True)
class TaskCounts:
    """Every task's count of one job."""

    tasks: tuple[TaskCount, ...]

    @property
    def rows(self) -> int:
        return sum(task.rows for task in self.tasks)

    @property
    def deleted(self) -> int:
        return sum(task.deleted for task in self.tasks)

    def total(self, target: str) -> int:
        """Rows written towards ``target`` by all tasks."""
        return sum(task.targets.get(target, 0) for task in self.tasks)

    def check(self, store: str, what: str, table: str) -> None:
        """Raise ``ReplayError`` if any task's sink refused a row."""
        rejected = sum(task.rejected for task in self.tasks)
        if rejected:
            example = next(task.example for task in self.tasks if task.example)
            raise ReplayError(f"{store} refused {rejected} {what} of {table}, for example "
                              f"{example}")

    def describe(self) -> str:
        """``written by 2 tasks (512+511 rows)``: the rows of each task that wrote any."""
        busy = [task for task in sorted(self.tasks, key=lambda t: t.partition) if task.rows]
        return (f"written by {len(busy)} task{'s' if len(busy) != 1 else ''} "
                f"({'+'.join(str(task.rows) for task in busy) or '0'} rows)")


@dataclass(frozen=True, slots=True)
class StateFeed:
    """A table's state rows, as batches of sink events, into the sinks a recipe builds."""

    history: TableHistory
    topic: str
    batch_size: int
    recipe: SinkRecipe

    def write_partition(self, partition: int, rows: Iterable[StateRow]) -> Iterator[TaskCount]:
        """The task's work (see the module docstring)."""
        yield from write_batches(
            partition, event_batches(self.history, self.topic, rows, self.batch_size),
            self.recipe)


def write_batches(partition: int, batches: Iterable[list[SinkEvent]],
                  recipe: SinkRecipe) -> Iterator[TaskCount]:
    """Write ``batches`` through a sink ``recipe`` builds (opened with the first batch),
    stopping at the first batch with a rejection; one ``TaskCount`` of the task."""
    sink: Sink | None = None
    targets: Targets | None = None
    counted: Counter[str] = Counter()
    written = deleted = rejected = 0
    example = None
    with _frozen_heap():
        try:
            for batch in batches:
                if sink is None or targets is None:
                    sink, targets = recipe.build()
                    sink.open()
                result = sink.write(batch)
                written += len(batch)
                if result.rejected:
                    first = result.rejected[0]
                    rejected, example = len(result.rejected), f"key {first.event.key}: " \
                        f"{first.reason}"
                    break
                kept = [event for event in batch if event.event["op"] != "d"]
                deleted += len(batch) - len(kept)
                counted.update(chain.from_iterable(map(targets, kept)))
            if sink is not None:
                sink.flush()
        finally:
            if sink is not None:
                sink.close()
    context = TaskContext.get()
    yield TaskCount(context.stageId() if context else -1, partition,
                    context.taskAttemptId() if context else -1, os.getpid(), written,
                    dict(counted), deleted, rejected, example)


@contextmanager
def _frozen_heap() -> Iterator[None]:
    """The objects tracked so far left out of cyclic collections until the block ends (see
    the module docstring); nothing changes if something else froze objects already."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def spread(state: DataFrame) -> DataFrame:
    """``state`` hashed by key over as many partitions as the cluster runs tasks at once
    (no sort, unlike a round-robin repartition; one row per key, so shares are even)."""
    parallelism = max(1, state.sparkSession.sparkContext.defaultParallelism)
    return state.repartition(parallelism, F.col(KEY_COLUMN))


def write_from_tasks(state: DataFrame, feed: StateFeed) -> TaskCounts:
    """Write every row of ``state`` from the task holding it; the tasks' counts."""
    counts = state.toJSON().mapPartitionsWithIndex(feed.write_partition).collect()
    return TaskCounts(tuple(counts))
