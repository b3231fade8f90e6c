"""Reading an iterator ahead of its consumer, in a thread of its own.

A source that waits on something else than the CPU (a socket, a sink's page) is read
while the consumer works on what came before, at most ``ahead`` items before they are
taken, so memory stays bounded. What the source raises is raised to the consumer, in its
place in the order. ``close()`` stops the thread and closes the source (in that thread).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterator
from typing import Generic, TypeVar, cast

T = TypeVar("T")

log = logging.getLogger(__name__)

_END = object()  # the source is exhausted


class ReadAhead(Generic[T]):
    """``source``'s items, read by a thread named ``name`` up to ``ahead`` items before
    they are taken. ``stop`` (set by ``close()``) is for a source that waits on something
    of its own, to look at meanwhile (a COPY's socket); the thread looks at it between
    items anyway."""

    def __init__(self, source: Iterator[T], ahead: int, *, name: str,
                 stop: threading.Event | None = None) -> None:
        self.stop = stop if stop is not None else threading.Event()
        self._ahead = max(1, ahead)
        self._ready: deque[object] = deque()
        self._changed = threading.Condition(threading.Lock())
        self._finished = False  # the end or the error was taken: every later call ends
        self._thread = threading.Thread(target=self._read, args=(source,), name=name,
                                        daemon=True)
        self._thread.start()

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        with self._changed:
            self._changed.wait_for(lambda: bool(self._ready) or self.stop.is_set())
            if not self._ready:  # closed
                self._finished = True
                raise StopIteration
            item = self._ready.popleft()
            self._changed.notify_all()
        if item is _END:
            self._finished = True
            raise StopIteration
        if isinstance(item, _Raised):
            self._finished = True
            raise item.error
        return cast(T, item)

    def close(self) -> None:
        """Stop reading (the source is closed by the thread) and wait for the thread."""
        self.stop.set()
        with self._changed:
            self._changed.notify_all()
        self._thread.join()
        self._finished = True

    def _read(self, source: Iterator[T]) -> None:
        try:
            for item in source:
                if not self._put(item):
                    return
            self._put(_END)
        except BaseException as exc:  # handed to the consumer, who raises it
            self._put(_Raised(exc))
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                try:
                    close()
                except Exception as exc:  # stopped early: nobody waits for its end
                    log.debug("closing %s after a stop failed: %r", self._thread.name, exc)

    def _put(self, item: object) -> bool:
        """Queue ``item`` once there is room; False if stopped first."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._ready) < self._ahead
                                   or self.stop.is_set())
            if self.stop.is_set():
                return False
            self._ready.append(item)
            self._changed.notify_all()
        return True


class _Raised:
    """An error of the source, in its place among the items."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error
