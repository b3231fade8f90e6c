"""Gathering a batch from a consumer: up to ``batch_size`` messages, or whatever came
within ``batch_timeout`` of the first one, or what is in hand when a stop is asked."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from cdc.log import Consumer, Message

IDLE_POLL_S = 0.5


class BatchCollector:
    """Polls one consumer into batches."""

    def __init__(self, consumer: Consumer, *, batch_size: int, batch_timeout: float,
                 stop: threading.Event, clock: Callable[[], float] = time.monotonic) -> None:
        self._consumer = consumer
        self._batch_size = batch_size
        self._batch_timeout = batch_timeout
        self._stop = stop
        self._clock = clock

    def collect(self, idle_wait: float = IDLE_POLL_S) -> list[Message]:
        """The next batch; empty when nothing came within ``idle_wait`` seconds or a stop
        was asked."""
        messages = self._consumer.poll(self._batch_size, idle_wait)
        if not messages:
            return []
        deadline = self._clock() + self._batch_timeout
        while len(messages) < self._batch_size and not self._stop.is_set():
            remaining = deadline - self._clock()
            if remaining <= 0:
                break
            messages += self._consumer.poll(self._batch_size - len(messages),
                                            min(remaining, IDLE_POLL_S))
        return messages
