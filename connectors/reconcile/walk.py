"""Walking one table against its targets: chunks, catch-up, comparison, rechecks, extras.

Each chunk is compared with each target as soon as it is read (each target in a thread
of its own, in chunk order, at most ``AHEAD`` chunks behind the reads, while the next
chunk is read): a sink that holds what the rows hold is in step with
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

A target that is cheaper to read whole (``Target.scan``: a search index) is read page
by page beside the chunks, about as far as the table has been read, and its records are
paired with the rows by id whichever comes first (``matching``); a row still unpaired
after the last page is compared with no record.

Extras: each target lists the ids it holds (a scanned target: the records no row was
paired with; a target read by id: its ``listing``, read by a thread of its own from the
walk's start on, so a ``SCAN`` costs no time of its own); after the last chunk, an id no
row of the walk had, whose version is older than the walk's start, is a candidate. After
a catch-up the candidates still held under such a version are extras. (Listing while the
walk runs loses none: a candidate was written before the walk's start and is held after
its end, so it was held for the whole listing, and a ``SCAN`` returns every key held from
its start to its end.)
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from itertools import filterfalse
from typing import Protocol

from cdc.readahead import ReadAhead
from connectors.contract import version_of

from .compare import Difference, Kind, compare_chunk, compare_row, describe_version
from .matching import Collected, RecordMatch
from .source import KeyText, SourceRead, SourceRow
from .target import HeldPage, Target

log = logging.getLogger(__name__)

RECHECKS = 4  # fresh reads of a differing key before it is left for the next run
AHEAD = 2  # chunks a target's comparison may lag behind the reads
SCAN_AHEAD = 2  # pages of a scanned target read before the walk takes them


@dataclass
class TargetFindings:
    """What one target of the table differs in, and each row id's chunk key."""

    target: Target
    differences: list[Difference] = field(default_factory=list)
    keys: dict[str, KeyText] = field(default_factory=dict)  # sink id → chunk key (rows)
    seen: set[str] = field(default_factory=set)  # ids of rows (targets read by id)
    pages: ReadAhead[HeldPage] | None = None  # a scanned target's
    match: RecordMatch | None = None  # ... rows and records not yet paired
    scanned: int = 0                  # ... records read so far
    listed: Collected | None = None   # a target read by id: its listing, read meanwhile


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
        try:
            for found in findings.targets:
                pages = found.target.scan()
                if pages is not None:
                    found.pages = ReadAhead(pages, SCAN_AHEAD, name="reconcile-scan")
                    found.match = RecordMatch(missing_is_drift=found.target.missing_is_drift)
                else:
                    found.listed = Collected(found.target.listing())
            self._walk(findings)
            self._recheck(findings)
            for found in findings.targets:
                self._extras(found, walk_start)
        finally:
            for found in findings.targets:
                for reader in (found.pages, found.listed):
                    close = getattr(reader, "close", None)
                    if close is not None:
                        close()
        return findings

    def _walk(self, findings: TableFindings) -> None:
        """Read chunks one after another in one thread, and compare them in one thread
        per target, each target's in order; a target may lag ``AHEAD`` chunks behind
        the reads (so a slow sink and a slow table overlap instead of adding up)."""
        with contextlib.ExitStack() as stack:
            reader = stack.enter_context(ThreadPoolExecutor(1, "reconcile-read"))
            comparers = [stack.enter_context(ThreadPoolExecutor(1, "reconcile-compare"))
                         for _ in findings.targets]
            in_flight: deque[list[Future[None]]] = deque()
            read = self.source.chunk(None, self.chunk_rows)
            while read.rows:
                findings.rows += len(read.rows)
                more = len(read.rows) == self.chunk_rows
                if more:  # the next chunk is read while the sinks are compared
                    self._pace(findings.rows)
                    ahead = reader.submit(self.source.chunk, read.rows[-1].key_text,
                                          self.chunk_rows)
                in_flight.append([comparer.submit(self._compare, found, read, findings.rows)
                                  for comparer, found in zip(comparers, findings.targets,
                                                             strict=True)])
                while len(in_flight) > AHEAD:
                    _results(in_flight.popleft())
                if not more:
                    break
                read = ahead.result()
            while in_flight:
                _results(in_flight.popleft())
            _results([comparer.submit(self._unpaired, found) for comparer, found
                      in zip(comparers, findings.targets, strict=True)
                      if found.match is not None])

    def _compare(self, found: TargetFindings, read: SourceRead, rows_read: int) -> None:
        """One chunk against one target: as bytes where the target has them (paired with
        a scan, or read by id), the ids that differ, and targets without bytes, as
        records."""
        target = found.target
        encoded = target.encoded(read.rows)
        if encoded is None:
            expected = target.expected(read.rows)
            found.seen.update(expected)
            stored = target.read(list(expected))
            differences = compare_chunk(expected, stored,
                                        read_version=version_of(read.before_lsn, 0),
                                        missing_is_drift=target.missing_is_drift)
            self._note(found, differences, read.rows)
            return
        if found.match is not None:
            self._scan_to(found, rows_read)
            self._suspects(found, found.match.rows(encoded))
            return
        found.seen.update(encoded)
        held = target.held(list(encoded))
        lost_is_fine = not target.missing_is_drift
        self._suspects(found, [row for sink_id, (expected, row) in encoded.items()
                               if held.get(sink_id) != expected
                               and not (lost_is_fine and sink_id not in held)])

    def _suspects(self, found: TargetFindings, rows: list[SourceRow]) -> None:
        """Compare again as records the rows whose bytes differ (read again by id)."""
        target = found.target
        for start in range(0, len(rows), self.chunk_rows):
            some = rows[start:start + self.chunk_rows]
            expected = target.expected(some)
            differences = compare_chunk(expected, target.read(list(expected)),
                                        read_version=0, missing_is_drift=target.missing_is_drift)
            self._note(found, differences, some)

    def _note(self, found: TargetFindings, differences: list[Difference],
              rows: Sequence[SourceRow]) -> None:
        """Add ``differences`` and the chunk keys of their rows. (Whether a difference is
        settled is decided by the recheck, from fresh reads.)"""
        if not differences:
            return
        found.differences += differences
        by_id = {found.target.sink_id(row): row for row in rows}
        for difference in differences:
            row = by_id.get(difference.sink_id)
            if row is not None:
                found.keys[difference.sink_id] = row.key_text

    def _scan_to(self, found: TargetFindings, records: int | None) -> None:
        """Read a scanned target's pages until ``records`` came (``None``: every one)."""
        assert found.match is not None
        while found.pages is not None and (records is None or found.scanned < records):
            page = next(found.pages, None)
            if page is None:
                found.pages = None
                break
            found.scanned += len(page)
            self._suspects(found, found.match.records(page))

    def _unpaired(self, found: TargetFindings) -> None:
        """After the last chunk: the rest of a scanned target, and its unpaired rows."""
        assert found.match is not None
        self._scan_to(found, None)
        self._suspects(found, found.match.unpaired_rows())

    def _recheck(self, findings: TableFindings) -> None:
        """Check every difference again (see the module docstring)."""
        for found in findings.targets:
            recheck(found, findings, self._check_again, "keys")

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
        if found.match is not None:  # a scanned target: what no row was paired with
            held: Iterable[tuple[str, int | None]] = found.match.unpaired_records()
        else:  # the versions of the ids no row had
            assert found.listed is not None
            held = found.target.versions(
                list(filterfalse(found.seen.__contains__, found.listed.result()))).items()
        candidates = [sink_id for sink_id, version in held
                      if version is None or version < walk_start]
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


def recheck(found: TargetFindings, findings: TableFindings,
            check_again: Callable[[TargetFindings, list[str]], list[Difference]],
            what: str) -> None:
    """Check ``found``'s differences again (``check_again``: from a fresh read) up to
    ``RECHECKS`` times; keep those settled, count the ones that never settle (``what``
    changed under every recheck) as unsettled."""
    pending = {d.sink_id: d for d in found.differences}
    confirmed: list[Difference] = []
    for _ in range(RECHECKS):
        if not pending:
            break
        still: dict[str, Difference] = {}
        for difference in check_again(found, sorted(pending)):
            if difference.settled:
                confirmed.append(difference)
            else:
                still[difference.sink_id] = difference
        pending = still
    if pending:
        log.info("%s: %d %s changed under every recheck; not reported", found.target.label,
                 len(pending), what)
        findings.unsettled += len(pending)
    found.differences = sorted(confirmed, key=lambda d: d.sink_id)


def _results(futures: Iterable[Future[None]]) -> None:
    """Wait for ``futures``; raise the first error."""
    for future in futures:
        future.result()
