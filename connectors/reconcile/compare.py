"""Comparing one chunk: what the sink should hold against what it holds (pure, no I/O).

``Expected`` maps each sink id of the chunk (an OpenSearch ``_id``, a Redis key) to the
record the connector's view derives from the row, or ``None`` when the view filters the
row out (then the sink must hold nothing). ``Stored`` maps the ids the sink holds to the
record and its version. Records are compared as values, id by id (a dict comparison
costs less than encoding the chunk to hash it); ``chunk_hash`` is the chunk's digest
where one canonical text of it is needed.

A difference is *settled* when the sink's copy cannot be explained by a change committed
after the rows were read: the sink holds no version, or one older than ``read_version``
(the source position noted just before the read), or no record at all where the row has
one (the caller compares only once the sink caught up with the read). Any other
difference may be a change in flight, and the caller checks that key again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import orjson

Record = dict[str, Any]


class Kind(Enum):
    """What is wrong with one key."""

    MISSING = "missing"      # the row has a record; the sink holds none
    EXTRA = "extra"          # the sink holds a record for no row (or a row the view drops)
    DIFFERENT = "different"  # both hold a record; fields differ


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record as the sink holds it, and its version (``None``: the sink keeps none)."""

    record: Record
    version: int | None


@dataclass(frozen=True, slots=True)
class Difference:
    """One key that differs, what differs, and whether a later change may explain it."""

    sink_id: str
    kind: Kind
    detail: str
    settled: bool
    sink_version: int | None = None  # the version of the sink's record, when it has one
    cause: str | None = None  # why, when known (``schema_history.explain``)

    def line(self, where: str) -> str:
        """The report line: ``<kind> <where> <id>: <detail>[; cause: <cause>]``."""
        cause = f"; cause: {self.cause}" if self.cause else ""
        return f"{self.kind.value} {where} {self.sink_id}: {self.detail}{cause}"


Expected = Mapping[str, Record | None]
Stored = Mapping[str, StoredRecord]


def chunk_hash(records: Mapping[str, Record | None]) -> bytes:
    """A digest of ``records`` (filtered rows, ``None``, count as absent): one canonical
    JSON text of the whole chunk (keys sorted at every level), hashed."""
    present = {sink_id: record for sink_id, record in records.items() if record is not None}
    text = orjson.dumps(present, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.blake2b(text, digest_size=16).digest()


def compare_chunk(expected: Expected, stored: Stored, *, read_version: int,
                  missing_is_drift: bool = True) -> list[Difference]:
    """The differences of one chunk, sorted by id (see the module docstring).

    ``missing_is_drift``: False where the sink expires records (a Redis ``ttl``).
    """
    found: list[Difference] = []
    for sink_id, record in expected.items():
        held = stored.get(sink_id)
        if held is not None and record is not None and held.record == record:
            continue  # the common case, without a call
        difference = compare_row(sink_id, record, True, held, read_version=read_version,
                                 missing_is_drift=missing_is_drift)
        if difference is not None:
            found.append(difference)
    for sink_id in stored.keys() - expected.keys():
        difference = compare_row(sink_id, None, False, stored[sink_id],
                                 read_version=read_version, missing_is_drift=missing_is_drift)
        if difference is not None:
            found.append(difference)
    return sorted(found, key=lambda d: d.sink_id)


def compare_row(sink_id: str, record: Record | None, is_row: bool, stored: StoredRecord | None,
                *, read_version: int, missing_is_drift: bool = True) -> Difference | None:
    """The difference for one id, or ``None`` when the sink holds what it should."""
    if stored is None:
        if record is None or not missing_is_drift:
            return None
        # settled: the row was read before the sink caught up, so a record is due by now
        return Difference(sink_id, Kind.MISSING, "the row has no record in the sink", True)
    if record is not None and record == stored.record:
        return None
    settled = stored.version is None or stored.version < read_version
    at = f" (sink version {describe_version(stored.version)})"
    if record is None:
        why = "the view filters this row out" if is_row else "no such row in the table"
        return Difference(sink_id, Kind.EXTRA, why + at, settled, stored.version)
    return Difference(sink_id, Kind.DIFFERENT, field_differences(record, stored.record) + at,
                      settled, stored.version)


def field_differences(expected: Record, stored: Record) -> str:
    """Which fields differ: ``status: 'paid' in the table, 'new' in the sink; …``."""
    parts: list[str] = []
    for name in sorted(expected.keys() | stored.keys()):
        if name not in stored:
            parts.append(f"{name}: missing in the sink")
        elif name not in expected:
            parts.append(f"{name}: not in the table's record")
        elif expected[name] != stored[name]:
            parts.append(f"{name}: {_short(expected[name])} in the table, "
                         f"{_short(stored[name])} in the sink")
    return "; ".join(parts) or "same fields, different encoding"


def describe_version(version: int | None) -> str:
    """A sink version as ``<commit LSN>/<seq>`` (``none`` when absent)."""
    if version is None:
        return "none"
    lsn, seq = version >> 10, version & 1023
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}#{seq}"


def _short(value: Any, limit: int = 60) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= limit else text[:limit - 1] + "…"
