"""Snapshot rows through the native core: a chunk of ``COPY … TO STDOUT`` text rows
becomes its events in one call (``native/src/snapshot/``), byte for byte what
``read_event`` and ``complete`` make of the same rows.

A table is converted natively when every column's codec is one the native core knows
(``KINDS``: integers, bool, text and the types kept as text, numeric, float4/8, the
temporal types, json/jsonb, bytea, arrays and ranges of those); others (composites,
multiranges) stay on the Python path. A row holding what PostgreSQL does not write under the
capture's session settings (bytes that are not UTF-8, another DateStyle, a json
document with a duplicate key, …) comes back as its raw line and goes through
``read_event`` here, which keeps an unreadable value as text (``unparsed``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import orjson

from cdc.log import Record
from cdc.native import CORE

from .. import codecs
from ..codecs.arrays import ArrayCodec
from ..codecs.records import RangeCodec
from ..events import CommitInfo, TableShape, complete, read_event
from .copy import copy_row

# codec → the native kind number: the codecs the native core reproduces, by name
KINDS: dict[Callable[[str], object], int] = {
    getattr(codecs, name): code for name, code in CORE.VALUE_KINDS.items()}


def _kind(codec: Callable[[str], object]) -> int | None:
    """The native code of ``codec`` (an array or a range of a native kind too), or None."""
    inner, form = codec, 0
    if isinstance(codec, ArrayCodec) and codec.delimiter == ",":
        inner, form = codec.element, CORE.ARRAY_OF
    elif isinstance(codec, RangeCodec):
        inner, form = codec.subtype, CORE.RANGE_OF
    code = KINDS.get(inner)
    return None if code is None else code | form


@dataclass(frozen=True, slots=True)
class NativeTable:
    """One table's native conversion: its plan, built once per shape."""

    shape: TableShape
    plan: CORE.SnapshotPlan

    @classmethod
    def of(cls, shape: TableShape) -> NativeTable | None:
        """The native conversion of ``shape``'s rows, or None when a column's codec is not
        one the native core knows."""
        if not shape.columns or len(shape.codecs) != len(shape.columns):
            return None
        kinds = [_kind(codec) for codec in shape.codecs]
        if None in kinds or len(set(shape.key_indexes)) != len(shape.key_indexes):
            return None
        try:
            orjson.dumps(shape.columns)  # a name orjson refuses: the reference decides
            plan = CORE.SnapshotPlan([k for k in kinds if k is not None],
                                     list(shape.columns), list(shape.key_indexes),
                                     shape.schema_version)
        except (TypeError, ValueError, OverflowError):
            return None
        return cls(shape, plan)

    def _source(self, commit: CommitInfo) -> tuple[bytes, bytes]:
        prefix = b',"source":{"db":%s,%s,"lsn":"%s","commit_lsn":"%s","seq":' % (
            commit.db, self.shape.source_names, commit.commit_lsn_text,
            commit.commit_lsn_text)
        return prefix, b"," + commit.tail

    def rows(self, chunk: bytes, commit: CommitInfo, first_seq: int,
             into: CORE.SnapshotBatch | None = None) -> CORE.SnapshotBatch:
        """The records of ``chunk``'s rows grouped and encoded natively, for the file
        log's ``append_encoded`` (the same lines ``records`` make through ``append``); the
        rows the native core cannot convert are converted here. ``into``: rows of this
        table numbered up to ``first_seq``, to add these to (one buffer, one journal part
        per partition, whatever the chunks); else a new batch."""
        shape = self.shape
        lsn = commit.commit_lsn
        source = self._source(commit)
        if (into is not None and into.topic == shape.topic and into.lsn == lsn
                and into.first_seq + len(into) == first_seq):
            batch, fallbacks = into, into.extend(chunk, self.plan, source, first_seq)
        else:
            batch, fallbacks = CORE.snapshot_batch(chunk, self.plan, shape.topic, lsn, source,
                                                   first_seq)
        for index, line in fallbacks:
            event = read_event(shape, copy_row(line), lsn)
            batch.fill(index, event.key, complete(event, commit, batch.first_seq + index))
        return batch

    def bodies(self, chunk: bytes, lsn: int) -> list[tuple[bytes, bytes]]:
        """``(key, body)`` of each row of ``chunk``, as ``read_event`` gives them."""
        shape = self.shape
        out: list[tuple[bytes, bytes]] = []
        for item in CORE.snapshot_rows(chunk, self.plan):
            if isinstance(item, tuple):
                out.append(item)
            else:
                event = read_event(shape, copy_row(item), lsn)
                out.append((event.key, event.body))
        return out

    def records(self, chunk: bytes, commit: CommitInfo, first_seq: int) -> list[Record]:
        """The log records of the rows of ``chunk`` (whole COPY lines), numbered
        ``(commit_lsn, first_seq + i)``, for a log that takes records: what ``read_event``
        then ``complete`` make."""
        return self.rows(chunk, commit, first_seq).records()


@dataclass(frozen=True, slots=True)
class CopyChunk:
    """Whole COPY text lines of one table, each ending with a newline, to convert."""

    table: NativeTable
    data: bytes
