"""Pairing a table's rows with a sink's records when each comes in its own order.

A sink whose records are far cheaper to read all at once than by id (a search index: a
scroll page costs a fraction of an ``ids`` search of the same documents) is read whole
while the table is walked: each id is checked as soon as both its row and its record
have arrived, whichever came first, so only what is out of step waits in memory. Equal
bytes are equal records; any other pair is a *suspect* the walk compares as records.
After the last chunk and the last page, a row with no record is a suspect too (unless
its view filters it out, or records expire), and a record with no row a candidate extra.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from .source import SourceRow
from .target import Encoded, HeldPage


class RecordMatch:
    """The rows and records of one table and target not yet paired (not thread-safe)."""

    def __init__(self, *, missing_is_drift: bool = True) -> None:
        self.missing_is_drift = missing_is_drift
        self._rows: Encoded = {}                                 # rows waiting for a record
        self._records: dict[str, tuple[bytes, int | None]] = {}  # records waiting for a row

    def rows(self, encoded: Encoded) -> list[SourceRow]:
        """Add a chunk's rows; the suspects among those whose record came."""
        suspects: list[SourceRow] = []
        records, waiting = self._records, self._rows
        for sink_id, pair in encoded.items():
            held = records.pop(sink_id, None)
            if held is None:
                waiting[sink_id] = pair
            elif held[0] != pair[0]:
                suspects.append(pair[1])
        return suspects

    def records(self, page: HeldPage) -> list[SourceRow]:
        """Add records the sink holds; the suspects among those whose row came."""
        suspects: list[SourceRow] = []
        records, waiting = self._records, self._rows
        for sink_id, held, version in page:
            pair = waiting.pop(sink_id, None)
            if pair is None:
                records[sink_id] = (held, version)
            elif held != pair[0]:
                suspects.append(pair[1])
        return suspects

    def unpaired_rows(self) -> list[SourceRow]:
        """Once every record came: the suspects among the rows that have none (forgotten
        here)."""
        suspects = [row for encoded, row in self._rows.values()
                    if encoded is not None and self.missing_is_drift]
        self._rows.clear()
        return suspects

    def unpaired_records(self) -> list[tuple[str, int | None]]:
        """Once every row came: the ids and versions of the records no row has."""
        return [(sink_id, version) for sink_id, (_, version) in self._records.items()]


class Collected:
    """Every item of an iterator, read to its end by a thread of its own while the walk
    works (a sink's listing of ids); ``result()`` waits for them, ``close()`` stops the
    thread early."""

    def __init__(self, items: Iterator[str]) -> None:
        self._items: list[str] = []
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(items,),
                                        name="reconcile-listing", daemon=True)
        self._thread.start()

    def result(self) -> list[str]:
        """Every item (waits for the last); the iterator's error, if it raised one."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._items

    def close(self) -> None:
        """Stop reading (the iterator is closed by its thread)."""
        self._stop.set()
        self._thread.join()

    def _read(self, items: Iterator[str]) -> None:
        append, stop = self._items.append, self._stop.is_set
        try:
            for item in items:
                if stop():
                    return
                append(item)
        except BaseException as exc:  # handed to the walk, which raises it
            self._error = exc
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
