"""Walking one table against its targets: chunks, catch-up, comparison, rechecks, extras.

Each chunk is compared with each target as soon as it is read (the targets in parallel,
while the next chunk is read): a sink that holds what the rows hold is in step with
them, lag or not, so a clean chunk costs no waiting. A difference may be a change in
flight — the sink behind the read, or ahead of it (a row updated, deleted or filtered
out just after) — so every difference is checked again
(``RECHECKS`` times at most): the rows of just those keys are read, the walk waits until
the capture has logged past that read and every connector involved has consumed its
topic's end (``catch_up``), the sink is read, and the rows are read once more. A key is
reported when it still differs and its row did not change between the two reads (same
``stamp``; for a key with no row, when the sink's record is older than the first read,
``compare``); keys that converge are dropped, and keys that keep changing (hot rows) are
left for the next run.

Extras: after the last chunk each target lists the ids it holds; an id no row of the
walk had, whose version is older than the walk's start, is a candidate. After a
catch-up the candidates still held under such a version are extras.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Protocol

from connectors.contract import version_of

from .compare import Difference, Kind, compare_chunk, compare_row, describe_version
from .source import KeyText, SourceRead
from .target import Target

log = logging.getLogger(__name__)

RECHECKS = 4  # fresh reads of a differing key before it is left for the next run


@dataclass
class TargetFindings:
    """What one target of the table differs in, and each row id's chunk key."""

    target: Target
    differences: list[Difference] = field(default_factory=list)
    keys: dict[str, KeyText] = field(default_factory=dict)  # sink id → chunk key (rows)
    seen: set[str] = field(default_factory=set)


@dataclass
class TableFindings:
    """The outcome of walking one table."""

    table: str
    rows: int = 0
    targets: list[TargetFindings] = field(default_factory=list)
    unsettled: int = 0
    walk_start: int = 0  # the sink version of the walk's start: newer records are not extras

    @property
    def differences(self) -> list[tuple[Target, Difference]]:
        return [(found.target, d) for found in self.targets for d in found.differences]


class RowSource(Protocol):
    """What the walk reads a table through (``source.TableSource``)."""

    name: str

    def chunk(self, after: KeyText | None, limit: int) -> SourceRead:
        """The next ``limit`` rows after key ``after``."""

    def rows_of(self, keys: Sequence[KeyText]) -> SourceRead:
        """The rows of ``keys`` that exist now."""

    def current_lsn(self) -> int:
        """The current WAL position."""


CatchUp = Callable[[int], None]  # wait until everything before this LSN is in the sinks


@dataclass
class TableWalk:
    """One table, its targets, and how to wait for them (see the module docstring)."""

    source: RowSource
    targets: Sequence[Target]
    catch_up: CatchUp
    chunk_rows: int = 1000
    rate: float | None = None  # rows per second, at most
    _started: float = 0.0

    def run(self) -> TableFindings:
        """Walk the whole table."""
        findings = TableFindings(self.source.name, targets=[TargetFindings(t)
                                                            for t in self.targets])
        self._started = time.monotonic()
        walk_start = findings.walk_start = version_of(self.source.current_lsn(), 0)
        with ThreadPoolExecutor(max_workers=len(self.targets) + 1,
                                thread_name_prefix="reconcile") as pool:
            read = self.source.chunk(None, self.chunk_rows)
            while read.rows:
                findings.rows += len(read.rows)
                more = len(read.rows) == self.chunk_rows
                if more:  # the next chunk is read while the sinks are compared
                    self._pace(findings.rows)
                    ahead = pool.submit(self.source.chunk, read.rows[-1].key_text,
                                        self.chunk_rows)
                for future in [pool.submit(self._compare, found, read)
                               for found in findings.targets]:
                    future.result()
                if not more:
                    break
                read = ahead.result()
        self._recheck(findings)
        for found in findings.targets:
            self._extras(found, walk_start)
        return findings

    def _compare(self, found: TargetFindings, read: SourceRead) -> None:
        target = found.target
        expected = target.expected(read.rows)
        for row in read.rows:
            sink_id = target.sink_id(row)
            if sink_id is not None:
                found.keys[sink_id] = row.key_text
        found.seen.update(expected)
        stored = target.read(list(expected))
        found.differences += compare_chunk(expected, stored,
                                           read_version=version_of(read.before_lsn, 0),
                                           missing_is_drift=target.missing_is_drift)

    def _recheck(self, findings: TableFindings) -> None:
        """Check every difference again (see the module docstring)."""
        for found in findings.targets:
            pending = {d.sink_id: d for d in found.differences}
            confirmed: list[Difference] = []
            for _ in range(RECHECKS):
                if not pending:
                    break
                still: dict[str, Difference] = {}
                for difference in self._check_again(found, sorted(pending)):
                    if difference.settled:
                        confirmed.append(difference)
                    else:
                        still[difference.sink_id] = difference
                pending = still
            if pending:
                log.info("%s: %d keys changed under every recheck; not reported",
                         found.target.label, len(pending))
                findings.unsettled += len(pending)
            found.differences = sorted(confirmed, key=lambda d: d.sink_id)

    def _check_again(self, found: TargetFindings, ids: list[str]) -> list[Difference]:
        """``ids`` compared again: their rows read, a catch-up, the sink read, the rows
        read again. A row whose stamp did not move between the two reads had no change
        the sink could be ahead or behind of, so its difference is settled."""
        keys = sorted({found.keys[i] for i in ids})
        first = self.source.rows_of(keys)
        self.catch_up(first.after_lsn)
        stored = found.target.read_now(ids)
        second = self.source.rows_of(keys)
        target = found.target
        expected = target.expected(first.rows)
        stamps = {target.sink_id(row): row.stamp for row in first.rows}
        stamps_after = {target.sink_id(row): row.stamp for row in second.rows}
        out: list[Difference] = []
        for sink_id in ids:
            difference = compare_row(
                sink_id, expected.get(sink_id), sink_id in expected, stored.get(sink_id),
                read_version=version_of(first.before_lsn, 0),
                missing_is_drift=target.missing_is_drift)
            if difference is None:
                continue
            stable = stamps.get(sink_id) == stamps_after.get(sink_id)
            row = sink_id in stamps
            settled = stable and (row or difference.settled)
            out.append(replace(difference, settled=settled))
        return out

    def _extras(self, found: TargetFindings, walk_start: int) -> None:
        """Ids the sink holds for no row of the walk, older than the walk's start (read
        again after a catch-up, in real time: a search may still list a document deleted
        a moment ago)."""
        candidates = [sink_id for sink_id, version in found.target.listing()
                      if sink_id not in found.seen
                      and (version is None or version < walk_start)]
        if not candidates:
            return
        self.catch_up(self.source.current_lsn())  # a delete still in flight is no extra
        now = found.target.versions(candidates)
        for sink_id in sorted(now):
            version = now[sink_id]
            if version is None or version < walk_start:
                found.differences.append(Difference(
                    sink_id, Kind.EXTRA, "no such row in the table (sink version "
                    f"{describe_version(version)})", True))

    def _pace(self, rows: int) -> None:
        if self.rate:
            ahead = rows / self.rate - (time.monotonic() - self._started)
            if ahead > 0:
                time.sleep(ahead)
