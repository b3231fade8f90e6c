"""Rows handed to the file log already grouped by partition and encoded by their own
(native) code (``FileProducer.append_encoded``): a snapshot appends a million rows without
a ``Record`` per row. Whoever implements these promises the lines are exactly what
``encode_batch`` makes of the records they stand for (the snapshot's differential tests
hold its native batch to that)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..records import Position


class EncodedPart(Protocol):
    """One partition's rows of an ``EncodedRows``: its lines on request."""

    @property
    def partition(self) -> int: ...

    @property
    def count(self) -> int:
        """How many records (lines)."""

    @property
    def last_position(self) -> Position:
        """The source position of the last one."""

    def encode(self, first_offset: int, now_ms: int, size: int, last_indexed: int,
               index_interval: int) -> tuple[bytes, list[tuple[int, int]], int]:
        """As ``encode_batch`` of the records: the lines from ``first_offset`` (the first
        at byte ``size`` of the segment), the index entries, the last indexed byte."""


class EncodedRows(Protocol):
    """Records of one topic, to be grouped by partition like ``partition_for(key, n)``."""

    @property
    def topic(self) -> str: ...

    def parts(self, partitions: int) -> Sequence[EncodedPart]:
        """The rows per partition of a topic of ``partitions`` partitions, partitions in
        order of first appearance (as ``FileProducer.append`` groups records)."""
