"""A progress bar of Spark's stages and tasks on the terminal.

A thread polls ``SparkContext.statusTracker()`` a few times a second and shows one bar
per active stage (tasks done of tasks) with ``rich``; finished stages are counted in the
description line. Nothing runs on Spark's side: the tracker is the driver's own state.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import TaskID

from cdc.progress_bars import progress_bars

POLL_SECONDS = 0.25


class StageProgress:
    """Polls the status tracker of ``spark_context`` and renders active stages."""

    def __init__(self, spark_context: Any, console: Console) -> None:
        self._tracker = spark_context.statusTracker()
        self._progress = progress_bars(console, transient=True)
        self._bars: dict[int, TaskID] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spark-progress", daemon=True)
        self.stages_done = 0

    def __enter__(self) -> StageProgress:
        self._progress.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._progress.stop()

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                self._poll()
            except Exception:
                return

    def _poll(self) -> None:
        active = set(self._tracker.getActiveStageIds())
        for stage_id in active:
            info = self._tracker.getStageInfo(stage_id)
            if info is None:
                continue
            description = f"stage {stage_id} {str(info.name).split(' at ')[0]}"
            bar = self._bars.get(stage_id)
            if bar is None:
                bar = self._bars[stage_id] = self._progress.add_task(
                    description, total=max(int(info.numTasks), 1))
            self._progress.update(bar, completed=int(info.numCompletedTasks),
                                  total=max(int(info.numTasks), 1))
        for stage_id in [s for s in self._bars if s not in active]:
            self._progress.remove_task(self._bars.pop(stage_id))
            self.stages_done += 1


@contextmanager
def stage_progress(spark_context: Any, console: Console, enabled: bool) -> Iterator[None]:
    """Show stage progress while the block runs (if ``enabled``)."""
    if not enabled:
        yield
        return
    with StageProgress(spark_context, console):
        yield
