"""Walking one joined view against a connector's sink, with PostgreSQL as the oracle.

A joined record depends on rows of several tables, so a walk reads every root row's
record from one snapshot of all of them (``join_source``: the joins made in SQL) instead
of chunks of one table. Once the snapshot is taken the walk waits until the capture and
the connector have caught up with it (``catch_up``), then compares the records batch by
batch with what the sink holds, read in real time by id (``Target.read_now``). A sink
ahead of the snapshot (a change committed after it) shows as a difference whose sink
version is not older than the snapshot (``compare``: not settled), so every difference is
checked again (``walk.RECHECKS`` times at most) from a fresh snapshot of just those root
keys and a fresh catch-up; a difference is reported once it is settled, and keys that
keep changing are left for the next run. Extras are ids the sink lists for no root row,
older than the walk's start and still held after a catch-up, as for a table.

``repair_join`` writes the differences straight into the sink, since a joined record is
not one row the capture could read again: from a fresh snapshot of their root keys (the
sink caught up with it), each record is written under the version of the WAL position
just before that snapshot, and each root key without a record deleted under it, with
the sink's own versioned writes (``external_gte``, the Redis sink's compare-and-set), so
a change committed after the snapshot (a newer version) is never overwritten. Extras of
no root row are deleted as ``repair.delete_extras`` deletes them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import filterfalse
from typing import Any, Protocol

from connectors.contract import version_of

from .compare import Difference, Kind, Record, compare_chunk, compare_row, describe_version
from .join_source import JoinedRead, JoinedRow
from .matching import Collected
from .target import Target
from .walk import CatchUp, TableFindings, TargetFindings, recheck

log = logging.getLogger(__name__)


class JoinTarget(Target, Protocol):
    """A ``Target`` that can also name, shape and write a joined record."""

    def id_of(self, key: Mapping[str, Any]) -> str | None:
        """The sink id of the record of root key ``key`` (``None``: it cannot hold it)."""

    def stored_form(self, record: Record) -> Record:
        """``record`` as ``read_now`` returns it."""

    def write(self, sink_id: str, record: Record, version: int) -> bool:
        """Write ``record`` under ``version`` unless a newer one is held."""


class JoinRowSource(Protocol):
    """What the walk reads a joined view through (``join_source.JoinedSource``)."""

    name: str

    def read(self, keys: Sequence[Sequence[str]] | None = None,
             on_snapshot: Callable[[int], None] | None = None) -> Iterator[JoinedRead]:
        """The root rows' records from one snapshot, in batches."""

    def current_lsn(self) -> int:
        """The current WAL position."""


@dataclass
class JoinWalk:
    """One joined view, its targets (one per connector), and how to wait for them."""

    source: JoinRowSource
    targets: Sequence[JoinTarget]
    catch_up: CatchUp
    rate: float | None = None  # root rows per second, at most

    def run(self) -> TableFindings:
        """Walk every root row of the view (see the module docstring)."""
        findings = TableFindings(self.source.name,
                                 targets=[TargetFindings(t) for t in self.targets])
        walk_start = findings.walk_start = version_of(self.source.current_lsn(), 0)
        listings = [Collected(target.listing()) for target in self.targets]
        started = time.monotonic()
        try:
            for read in self.source.read(on_snapshot=self.catch_up):
                findings.rows += len(read.rows)
                if self.rate:
                    time.sleep(max(0.0, findings.rows / self.rate
                                   - (time.monotonic() - started)))
                for found in findings.targets:
                    self._compare(found, read)
            for found in findings.targets:
                recheck(found, findings, self._check_again, "joined records")
            for found, listed in zip(findings.targets, listings, strict=True):
                self._extras(found, listed, walk_start)
        finally:
            for listed in listings:
                listed.close()
        return findings

    def _compare(self, found: TargetFindings, read: JoinedRead) -> None:
        target = _join_target(found)
        expected, keys = expected_records(target, read.rows)
        found.seen.update(expected)
        differences = compare_chunk(expected, target.read_now(list(expected)),
                                    read_version=version_of(read.before_lsn, 0),
                                    missing_is_drift=target.missing_is_drift)
        found.differences += differences
        for difference in differences:
            found.keys[difference.sink_id] = keys[difference.sink_id]

    def _check_again(self, found: TargetFindings, ids: list[str]) -> list[Difference]:
        target = _join_target(found)
        keys = sorted({found.keys[sink_id] for sink_id in ids})
        expected: dict[str, Record | None] = {}
        before = 0
        for read in self.source.read(keys, on_snapshot=self.catch_up):
            before = read.before_lsn
            expected.update(expected_records(target, read.rows)[0])
        stored = target.read_now(ids)
        out: list[Difference] = []
        for sink_id in ids:
            difference = compare_row(sink_id, expected.get(sink_id), sink_id in expected,
                                     stored.get(sink_id),
                                     read_version=version_of(before, 0) if before else 0,
                                     missing_is_drift=target.missing_is_drift)
            if difference is not None:
                out.append(difference)
        return out

    def _extras(self, found: TargetFindings, listed: Collected, walk_start: int) -> None:
        """Ids the sink holds for no root row, older than the walk's start (read again
        after a catch-up)."""
        target = found.target
        held = target.versions(list(filterfalse(found.seen.__contains__, listed.result())))
        candidates = [sink_id for sink_id, version in held.items()
                      if version is None or version < walk_start]
        if not candidates:
            return
        self.catch_up(self.source.current_lsn())
        now = target.versions(candidates)
        for sink_id in sorted(now):
            version = now[sink_id]
            if version is None or version < walk_start:
                found.differences.append(Difference(
                    sink_id, Kind.EXTRA, "no such root row in the table (sink version "
                    f"{describe_version(version)})", True))


def expected_records(target: JoinTarget, rows: Sequence[JoinedRow]
                     ) -> tuple[dict[str, Record | None], dict[str, tuple[str, ...]]]:
    """Sink id → the record as the sink holds it (``None``: no record), and sink id →
    the root row's key texts."""
    expected: dict[str, Record | None] = {}
    keys: dict[str, tuple[str, ...]] = {}
    for row in rows:
        sink_id = target.id_of(row.key)
        if sink_id is None:
            continue
        expected[sink_id] = None if row.record is None else target.stored_form(row.record)
        keys[sink_id] = row.key_text
    return expected, keys


def repair_join(source: JoinRowSource, found: TargetFindings, catch_up: CatchUp,
                older_than: int) -> list[str]:
    """Repair ``found``'s differences in its sink (see the module docstring); one line
    per kind of repair done."""
    target = _join_target(found)
    ids = [d.sink_id for d in found.differences if d.sink_id in found.keys]
    extras = [d.sink_id for d in found.differences
              if d.kind is Kind.EXTRA and d.sink_id not in found.keys]
    lines: list[str] = []
    if ids:
        records: dict[str, Record | None] = {}
        rows: dict[str, JoinedRow] = {}
        before = 0
        for read in source.read(sorted({found.keys[i] for i in ids}), on_snapshot=catch_up):
            before = read.before_lsn
            for row in read.rows:
                sink_id = target.id_of(row.key)
                if sink_id is not None:
                    rows[sink_id] = row
                    records[sink_id] = row.record
        version = version_of(before, 0)
        written = deleted = 0
        for sink_id in ids:
            record = records.get(sink_id)
            if record is not None:
                written += target.write(sink_id, record, version)
            elif target.versions([sink_id]):
                deleted += target.delete(sink_id, version)
        lines.append(f"wrote {written} and deleted {deleted} of {len(ids)} joined records "
                     f"in {target.label} from a fresh snapshot (version "
                     f"{describe_version(version)})")
    if extras:
        lsn = source.current_lsn()
        catch_up(lsn)
        version = version_of(lsn, 0)
        deleted = 0
        for sink_id, stored in sorted(target.versions(extras).items()):
            if (stored is None or stored < older_than) and target.delete(sink_id, version):
                deleted += 1
        lines.append(f"deleted {deleted} of {len(extras)} extra records in {target.label}")
    return lines


def _join_target(found: TargetFindings) -> JoinTarget:
    target = found.target
    assert hasattr(target, "id_of"), "a joined view's target names records by root key"
    return target  # type: ignore[return-value]

