"""``ReadAhead``: a source read by its own thread at most ``ahead`` items before they
are taken, its error handed over in its place, stopped (and the source closed) by
``close``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from cdc.readahead import ReadAhead


def test_every_item_comes_in_order_and_the_end_stays_the_end() -> None:
    items = ReadAhead(iter(range(10_000)), 3, name="test-readahead")
    assert list(items) == list(range(10_000))
    assert next(items, None) is None


def test_the_source_is_read_at_most_ahead_items_before_they_are_taken() -> None:
    taken: list[int] = []

    def counted() -> Iterator[int]:
        for i in range(100):
            taken.append(i)
            yield i

    items = ReadAhead(counted(), 2, name="test-readahead")
    time.sleep(0.1)
    assert len(taken) <= 3  # two queued, a third waiting for room
    assert next(items) == 0
    items.close()


def test_the_error_of_the_source_is_raised_after_its_items() -> None:
    def failing() -> Iterator[str]:
        yield "a"
        raise ConnectionError("the sink went away")

    items = ReadAhead(failing(), 4, name="test-readahead")
    assert next(items) == "a"
    with pytest.raises(ConnectionError, match="the sink went away"):
        next(items)
    assert next(items, None) is None


def test_close_stops_the_thread_and_closes_the_source() -> None:
    closed = threading.Event()

    def endless() -> Iterator[int]:
        try:
            while True:
                yield 1
        finally:
            closed.set()

    items = ReadAhead(endless(), 2, name="test-readahead")
    assert next(items) == 1
    items.close()
    assert closed.is_set()
    assert not [t for t in threading.enumerate() if t.name == "test-readahead"]
    assert next(items, None) is None


def test_stop_is_the_event_a_waiting_source_looks_at() -> None:
    stop = threading.Event()

    def waiting() -> Iterator[int]:
        yield 1
        while not stop.wait(0.01):
            pass  # a socket wait that looks at ``stop`` now and then

    items = ReadAhead(waiting(), 2, name="test-readahead", stop=stop)
    assert next(items) == 1
    items.close()
    assert stop.is_set()
