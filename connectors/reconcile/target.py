"""What reconcile needs of a sink: the records it should hold, reading and listing what it
holds, and deleting a record under a version. One ``Target`` is one table through one
view (or none) of one connector.

A walk compares what it can as the exact bytes the sink's writer stores (``encoded``,
``held``, ``scan``): equal bytes are equal records, with no record built on either side;
the ids whose bytes differ are compared again as records (``expected``, ``read``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol, TypeAlias

from .compare import Record, StoredRecord
from .source import SourceRow

Encoded: TypeAlias = dict[str, tuple[bytes | None, SourceRow]]
"""Sink id → the bytes the sink should store for the row (``None``: filtered out), and
the row."""
HeldPage: TypeAlias = list[tuple[str, bytes, int | None]]
"""Records a sink holds: id, stored bytes, version."""


class Target(Protocol):
    """One table's records in one sink (see the module docstring)."""

    label: str               # for report lines: "<connector> <where>"
    missing_is_drift: bool   # False where records expire (a Redis ttl)

    def sink_id(self, row: SourceRow) -> str | None:
        """The row's id in the sink (``None``: the sink cannot hold it)."""

    def expected(self, rows: Sequence[SourceRow]) -> dict[str, Record | None]:
        """Sink id → the record the row should have there (``None``: filtered out)."""

    def encoded(self, rows: Sequence[SourceRow]) -> Encoded | None:
        """``expected`` as the bytes the sink stores; ``None`` when it stores none that
        compare (records are compared instead)."""

    def held(self, ids: Sequence[str]) -> dict[str, bytes]:
        """The bytes the sink holds for ``ids`` (absent ids are left out), as ``read``."""

    def read(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        """The records the sink holds for ``ids`` (absent ids are left out); may lag a
        little behind the sink's writes (a search index's refresh)."""

    def read_now(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        """``read``, with every write the sink acknowledged (for rechecks)."""

    def scan(self) -> Iterator[HeldPage] | None:
        """Every record the sink holds for this table as bytes, in pages, in the sink's
        own order, when reading them all costs much less than reading each chunk's ids
        (``matching``; only for a target with ``encoded``); ``None``: read by id."""

    def listing(self) -> Iterator[str]:
        """Every id the sink holds for this table."""

    def versions(self, ids: Sequence[str]) -> Mapping[str, int | None]:
        """The versions the sink holds for ``ids`` now (records present only)."""

    def delete(self, sink_id: str, version: int) -> bool:
        """Delete ``sink_id`` under ``version`` unless the sink holds a newer one; True
        if it was deleted."""

    def close(self) -> None:
        """Release connections."""
