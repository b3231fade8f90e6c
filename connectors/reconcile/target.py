"""What reconcile needs of a sink: the records it should hold, reading and listing what it
holds, and deleting a record under a version. One ``Target`` is one table through one
view (or none) of one connector."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from .compare import Record, StoredRecord
from .source import SourceRow


class Target(Protocol):
    """One table's records in one sink (see the module docstring)."""

    label: str               # for report lines: "<connector> <where>"
    missing_is_drift: bool   # False where records expire (a Redis ttl)

    def sink_id(self, row: SourceRow) -> str | None:
        """The row's id in the sink (``None``: the sink cannot hold it)."""

    def expected(self, rows: Sequence[SourceRow]) -> dict[str, Record | None]:
        """Sink id → the record the row should have there (``None``: filtered out)."""

    def read(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        """The records the sink holds for ``ids`` (absent ids are left out); may lag a
        little behind the sink's writes (a search index's refresh)."""

    def read_now(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        """``read``, with every write the sink acknowledged (for rechecks)."""

    def listing(self) -> Iterator[tuple[str, int | None]]:
        """Every id the sink holds for this table, with its version."""

    def versions(self, ids: Sequence[str]) -> Mapping[str, int | None]:
        """The versions the sink holds for ``ids`` now (records present only)."""

    def delete(self, sink_id: str, version: int) -> bool:
        """Delete ``sink_id`` under ``version`` unless the sink holds a newer one; True
        if it was deleted."""

    def close(self) -> None:
        """Release connections."""
