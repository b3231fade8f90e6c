"""Offset commits that give up waiting after a deadline.

librdkafka's synchronous commit waits until the group coordinator answers: with every
broker gone it waits for ever, and the connector with it (confluent-kafka-python #162,
#1801). ``DeadlineCommitter`` runs each commit on a daemon thread of its own, one at a
time and in order (a commit never overtakes an earlier one, so the committed offsets only
grow), and the caller waits at most ``timeout_s``: then ``KafkaCommitTimeoutError`` (a
transient error: the caller retries, or its worker starts again), while the commit goes
on waiting for the coordinator in the background.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

from cdc.errors import LogError, TransientError

Offsets = TypeVar("Offsets")


class KafkaCommitTimeoutError(LogError, TransientError):
    """An offset commit not answered within its deadline (no group coordinator)."""


class DeadlineCommitter(Generic[Offsets]):
    """``commit(offsets)`` run one at a time on a daemon thread, waited for up to a
    deadline (see the module docstring)."""

    def __init__(self, commit: Callable[[Offsets], object], name: str) -> None:
        self._commit = commit
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[Offsets, Future[None]] | None] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __call__(self, offsets: Offsets, timeout_s: float) -> None:
        """Commit ``offsets``; raise what the commit raised, or ``KafkaCommitTimeoutError``
        when it has not ended after ``timeout_s``."""
        done: Future[None] = Future()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name,
                                                daemon=True)
                self._thread.start()
            self._jobs.put((offsets, done))
        try:
            done.result(timeout=timeout_s)
        except TimeoutError:
            raise KafkaCommitTimeoutError(
                f"an offset commit was not answered within {timeout_s:g} s: the group's "
                "coordinator is unreachable (brokers down, or the network); it goes on "
                "in the background, and the commit is asked again") from None

    def close(self) -> None:
        """Let the thread end once the commits queued before have."""
        with self._lock:
            if self._thread is not None:
                self._jobs.put(None)
                self._thread = None

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            offsets, done = job
            if not done.set_running_or_notify_cancel():
                continue
            try:
                self._commit(offsets)
            except BaseException as exc:  # handed to the caller, which raises it
                done.set_exception(exc)
            else:
                done.set_result(None)

