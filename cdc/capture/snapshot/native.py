"""Snapshot rows through the native core: a chunk of ``COPY … TO STDOUT`` text rows
becomes its events in one call (``native/src/snapshot/``), byte for byte what
``read_event`` and ``complete`` make of the same rows.

A table is converted natively when every column's codec is one the native core knows
(``KINDS``: integers, bool, text and every type kept as text, numeric, float4/8, date,
timestamp, timestamptz, json/jsonb); any other table stays on the Python path. A row the native
core cannot convert exactly (a BC date, an offset other than UTC, bytes that are not
UTF-8, …) comes back as its raw line and goes through ``read_event`` here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import orjson

from cdc.log import Position, Record
from cdc.native import SnapshotCore, snapshot_core

from ..codecs import (
    decode_bool,
    decode_date,
    decode_float,
    decode_int,
    decode_json,
    decode_numeric,
    decode_text,
    decode_timestamp,
    decode_timestamptz,
)
from ..events import CommitInfo, TableShape, complete, read_event
from .copy import copy_row

# codec → the native kind number (native/src/snapshot/values.rs, `Kind::from_code`)
KINDS: dict[Callable[[str], object], int] = {
    decode_text: 0, decode_int: 1, decode_bool: 2, decode_float: 3, decode_numeric: 4,
    decode_date: 5, decode_timestamp: 6, decode_timestamptz: 7, decode_json: 8,
}


class NativeTable:
    """One table's native conversion: its plan, built once per shape."""

    def __init__(self, core: SnapshotCore, shape: TableShape, plan: object) -> None:
        self.core = core
        self.shape = shape
        self.plan = plan

    @classmethod
    def of(cls, shape: TableShape, core: SnapshotCore | None = None) -> NativeTable | None:
        """The native conversion of ``shape``'s rows, or None when the native core is
        off or missing, or a column's codec is not one it knows."""
        core = core if core is not None else snapshot_core()
        if core is None or not shape.columns or len(shape.codecs) != len(shape.columns):
            return None
        kinds = [KINDS.get(codec) for codec in shape.codecs]
        if None in kinds or len(set(shape.key_indexes)) != len(shape.key_indexes):
            return None
        try:
            orjson.dumps(shape.columns)  # a name orjson refuses: the reference decides
            plan = core.SnapshotPlan([k for k in kinds if k is not None], list(shape.columns),
                                     list(shape.key_indexes), shape.schema_version)
        except (TypeError, ValueError, OverflowError):
            return None
        return cls(core, shape, plan)

    def bodies(self, chunk: bytes, lsn: int) -> list[tuple[bytes, bytes]]:
        """``(key, body)`` of each row of ``chunk``, as ``read_event`` gives them."""
        shape = self.shape
        out: list[tuple[bytes, bytes]] = []
        for item in self.core.snapshot_rows(chunk, self.plan):
            if isinstance(item, tuple):
                out.append(item)
            else:
                event = read_event(shape, copy_row(item), lsn)
                out.append((event.key, event.body))
        return out

    def records(self, chunk: bytes, commit: CommitInfo, first_seq: int) -> list[Record]:
        """The log records of the rows of ``chunk`` (whole COPY lines), numbered
        ``(commit_lsn, first_seq + i)``: what ``read_event`` then ``complete`` make."""
        shape = self.shape
        lsn = commit.commit_lsn
        prefix = b',"source":{"db":%s,%s,"lsn":"%s","commit_lsn":"%s","seq":' % (
            commit.db, shape.source_names, commit.commit_lsn_text, commit.commit_lsn_text)
        records, fallbacks = self.core.snapshot_records(
            chunk, self.plan, shape.topic, lsn, (prefix, b"," + commit.tail), first_seq)
        for index, line in fallbacks:
            seq = first_seq + index
            event = read_event(shape, copy_row(line), lsn)
            records[index] = Record(shape.topic, event.key, complete(event, commit, seq),
                                    Position(lsn, seq))
        return records  # type: ignore[return-value]  # every None was replaced


@dataclass(frozen=True, slots=True)
class CopyChunk:
    """Whole COPY text lines of one table, each ending with a newline, to convert."""

    table: NativeTable
    data: bytes
