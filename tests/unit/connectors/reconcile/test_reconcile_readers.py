"""``Collected``: a listing read to its end by its own thread, its error handed over,
and stopped early by ``close``."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from connectors.reconcile.matching import Collected


def test_collected_returns_every_item_in_order() -> None:
    assert Collected(iter(str(i) for i in range(10_000))).result() == [
        str(i) for i in range(10_000)]


def test_collected_raises_the_error_of_the_iterator() -> None:
    def failing() -> Iterator[str]:
        yield "a"
        raise ConnectionError("redis went away")

    with pytest.raises(ConnectionError, match="redis went away"):
        Collected(failing()).result()


def test_collected_close_stops_the_thread_and_closes_the_iterator() -> None:
    release, closed = threading.Event(), threading.Event()

    def endless() -> Iterator[str]:
        try:
            while True:
                release.wait()
                yield "x"
        finally:
            closed.set()

    listing = Collected(endless())
    release.set()
    listing.close()
    assert closed.is_set()
