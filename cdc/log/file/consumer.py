"""The file log's consumer: a member of a group, reading its share of the partitions.

Work follows activity, not the number of topics: the member keeps the partitions that
may have unread records in ``_dirty`` (filled from the doorbells of ``notify``), and a
poll reads only those, each an equal share of the poll (``_read``). Readers open their
segment on first read and share the log's bounded pool of open files.

A commit is written to the group's journal at once (every member and process sees it)
and fsynced within ``offsets_sync_s`` (by a later commit or poll), when a partition is
revoked and on close: see ``offsets`` for why a machine crash losing the last commits
only delivers some events again.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..records import Backpressure, BackpressurePolicy, Message, StartAt, StartKind, TopicPartition
from .groups import GroupMember
from .notify import TOPICS_BELL, AppendWatcher, doorbell_name, doorbells_dir
from .offsets import OffsetStore
from .reader import PartitionReader
from .topics import end_offset, list_topics, partition_dir, read_meta, start_offset

if TYPE_CHECKING:
    from .directory import LogDirectory

log = logging.getLogger(__name__)

REBALANCE_EVERY_S = 0.5
TOPICS_RESCAN_S = 10.0  # a safety net: new topics are normally announced by a doorbell
TOPICS_RESCAN_MIN_S = 0.5  # however often topics are created (a snapshot of 2,000 tables)
DROP_CHECK_EVERY_S = 0.5
OFFSETS_SYNC_S = 0.5


class FileConsumer:
    """Reads the partitions this member holds; sleeps on inotify when there is nothing."""

    def __init__(self, log: LogDirectory, group: str, *, topics: Sequence[str] = (),
                 pattern: str | None = None, start: StartAt | None = None,
                 backpressure: Backpressure | None = None,
                 offsets_sync_s: float = OFFSETS_SYNC_S) -> None:
        """``offsets_sync_s``: seconds a commit may stay unsynced (see the module
        docstring)."""
        if bool(topics) == (pattern is not None):
            raise ValueError("give either topics or pattern")
        self._log = log
        self._root = log.root
        self.group = group
        self._topics = list(topics)
        self._pattern = re.compile(pattern) if pattern is not None else None
        self._start = start or StartAt.committed()
        self._backpressure = backpressure or Backpressure()
        self._member = GroupMember(self._root, group, self._backpressure,
                                   session_timeout_s=log.settings.session_timeout_s)
        self._offsets = OffsetStore(self._root, group, sync_every=offsets_sync_s)
        self._readers: dict[TopicPartition, PartitionReader] = {}
        self._dirty: dict[TopicPartition, None] = {}  # may have unread records; oldest first
        self._bells: dict[str, TopicPartition] = {}
        self._delivered: dict[TopicPartition, int] = {}
        self._partition_counts: dict[str, int] = {}
        self._subscription: list[TopicPartition] = []
        self._dealt: tuple[tuple[str, ...], int] | None = None  # members, subscription seen
        self._desired: set[TopicPartition] = set()
        self._committed: dict[TopicPartition, int | None] = {}
        self._version = 0
        self._bells_dir = doorbells_dir(self._root)
        self._watcher = AppendWatcher()
        self._watcher.watch(self._bells_dir)
        self._watcher.watch(self._member.members_dir)
        self._next_rebalance = 0.0
        self._next_rescan = self._last_rescan = 0.0
        self._next_drop_check = 0.0
        self.dropped = 0

    @property
    def member_id(self) -> str:
        return self._member.member_id

    # -- membership ------------------------------------------------------------------
    def _rescan_topics(self) -> None:
        """Refresh the subscribed partitions (topic list and partition counts)."""
        self._last_rescan = time.monotonic()
        self._next_rescan = self._last_rescan + TOPICS_RESCAN_S
        names = (self._topics if self._pattern is None else
                 [t for t in list_topics(self._root) if self._pattern.fullmatch(t)])
        found: list[TopicPartition] = []
        for topic in names:
            count = self._partition_counts.get(topic)
            if count is None:
                meta = read_meta(self._root, topic)
                if meta is None:
                    continue
                count = self._partition_counts[topic] = meta.partitions
            found.extend(TopicPartition(topic, p) for p in range(count))
        if found != self._subscription:
            self._subscription = found
            self._version += 1

    def _rebalance(self) -> None:
        self._next_rebalance = time.monotonic() + REBALANCE_EVERY_S
        members = tuple(self._member.live_members())
        if self._dealt == (members, self._version) and len(self._readers) == len(self._desired):
            return
        if self._dealt != (members, self._version):
            self._desired = self._member.desired(self._subscription, list(members))
            self._dealt = (members, self._version)
        desired = self._desired
        revoked = [tp for tp in self._readers if tp not in desired]
        if revoked:
            self._offsets.sync()  # their next owner starts from synced commits
        for tp in revoked:
            self._readers.pop(tp).close()
            self._dirty.pop(tp, None)
            self._bells.pop(doorbell_name(tp.topic, tp.partition), None)
            self._delivered.pop(tp, None)
            self._committed.pop(tp, None)
            self._member.release(tp)
            log.info("partition revoked", extra={"group": self.group, "tp": str(tp)})
        assigned = 0
        for tp in sorted(desired - self._readers.keys(), key=lambda t: (t.topic, t.partition)):
            if not self._member.acquire(tp):
                continue  # its previous owner has not let go yet
            assigned += 1
            reader = PartitionReader(partition_dir(self._root, tp.topic, tp.partition),
                                     tp.topic, tp.partition, self._log.handles)
            reader.seek(self._start_offset(tp))
            self._readers[tp] = reader
            self._bells[doorbell_name(tp.topic, tp.partition)] = tp
            self._dirty[tp] = None
            log.debug("partition assigned", extra={"group": self.group, "tp": str(tp),
                                                   "offset": reader.next_offset})
        if assigned:
            log.info("%d partitions assigned (%d held)", assigned, len(self._readers),
                     extra={"group": self.group})

    def _start_offset(self, tp: TopicPartition) -> int:
        first = start_offset(self._root, tp.topic, tp.partition)
        kind = self._start.kind
        committed = self._committed[tp] = self._offsets.get(tp)
        if kind is StartKind.COMMITTED:
            if committed is not None:
                if committed < first:
                    log.warning("committed offset %d was removed by retention; going on "
                                "from %d", committed, first, extra={"tp": str(tp)})
                return max(committed, first)
            kind = self._start.fallback
        if kind is StartKind.LATEST:
            return end_offset(self._root, tp.topic, tp.partition)
        if kind in (StartKind.TIMESTAMP, StartKind.POSITION):
            return self._find_offset(tp, first)
        return first

    def _find_offset(self, tp: TopicPartition, first: int) -> int:
        reader = PartitionReader(partition_dir(self._root, tp.topic, tp.partition),
                                 tp.topic, tp.partition, self._log.handles)
        reader.seek(first)
        try:
            while batch := reader.read(10_000):
                for message in batch:
                    if self._start.kind is StartKind.TIMESTAMP:
                        if message.timestamp_ms >= self._start.timestamp_ms:
                            return message.offset
                    elif message.position.commit_lsn >= self._start.commit_lsn:
                        return message.offset
            return reader.next_offset
        finally:
            reader.close()

    # -- reading ---------------------------------------------------------------------
    def _take_changes(self) -> bool:
        """Mark the partitions whose doorbells rang; True when the members changed."""
        changes = self._watcher.drain()
        if changes.everything:
            self._dirty.update(dict.fromkeys(self._readers))
            self._next_rescan = 0.0
            return True
        for name in changes.in_dir(self._bells_dir):
            tp = self._bells.get(name)
            if tp is not None:
                self._dirty[tp] = None
            elif name == TOPICS_BELL:
                self._next_rescan = min(self._next_rescan,
                                        self._last_rescan + TOPICS_RESCAN_MIN_S)
        return bool(changes.in_dir(self._member.members_dir))

    def poll(self, max_records: int = 1000, timeout: float = 1.0) -> list[Message]:
        """The next records of this member's partitions, waiting up to ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            members_changed = self._take_changes()
            self._offsets.sync_if_due()
            now = time.monotonic()
            if now >= self._next_rescan:
                self._rescan_topics()
                self._next_rebalance = 0.0
            if members_changed or now >= self._next_rebalance:
                self._rebalance()
            if self._backpressure.policy is BackpressurePolicy.DROP and \
                    now >= self._next_drop_check:
                self._drop_excess()
            out = self._read(max_records)
            if out:
                return out
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            self._watcher.wait(min(remaining, REBALANCE_EVERY_S))

    def _read(self, max_records: int) -> list[Message]:
        """Up to ``max_records`` from the dirty partitions, shared out fairly: each round
        gives every dirty partition an equal share of the room left, so a partition with a
        backlog (a large transaction on one table) cannot hold back a small one's next
        records for whole polls. A read that fails (a damaged segment) after others
        succeeded returns what they read; the partition stays dirty and fails the next
        poll."""
        out: list[Message] = []
        while self._dirty and len(out) < max_records:
            share = -(-(max_records - len(out)) // len(self._dirty))  # rounded up
            read_any = False
            for tp in list(self._dirty):
                room = min(share, max_records - len(out))
                if room <= 0:
                    break
                try:
                    batch = self._readers[tp].read(room)
                except Exception:
                    if out:  # what came before a bad record first; the next poll raises
                        return out
                    raise
                del self._dirty[tp]
                if batch:
                    self._dirty[tp] = None  # more may follow: read again, after the others
                    out.extend(batch)
                    self._delivered[tp] = batch[-1].offset + 1
                    read_any = True
            if not read_any:
                break
        return out

    def _drop_excess(self) -> None:
        self._next_drop_check = time.monotonic() + DROP_CHECK_EVERY_S
        for tp in self._dirty:  # the others have nothing unread
            reader = self._readers[tp]
            end = end_offset(self._root, tp.topic, tp.partition)
            lag = end - reader.next_offset
            if lag > self._backpressure.max_lag:
                self.dropped += lag
                log.warning("consumer lag %d over %d: dropping to the newest", lag,
                            self._backpressure.max_lag,
                            extra={"group": self.group, "tp": str(tp), "dropped": lag})
                reader.seek(end)
                self._delivered[tp] = end

    # -- offsets ---------------------------------------------------------------------
    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit next offsets (default: just after what ``poll`` returned): visible to
        the group at once, fsynced within ``offsets_sync_s`` (see the module docstring).

        Offsets of partitions this member no longer holds are not written: their new
        owner starts from the last offset committed while this member held them.
        """
        pending = dict(self._delivered if offsets is None else offsets)
        changed: dict[TopicPartition, int] = {}
        for tp, offset in pending.items():
            if self._member.owns(tp):
                if self._committed.get(tp, -1) != offset:
                    changed[tp] = offset
            else:
                log.info("not committing %s: partition was reassigned", tp)
        self._offsets.put_many(changed)  # one write for all of them
        self._committed.update(changed)

    def assignment(self) -> set[TopicPartition]:
        """The partitions this member reads now."""
        return set(self._readers)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Read ``partition`` from ``offset`` on (it must be assigned)."""
        self._readers[partition].seek(offset)
        self._dirty[partition] = None

    def close(self) -> None:
        """Sync the commits, leave the group and release every file."""
        try:
            self._offsets.close()
        finally:
            for reader in self._readers.values():
                reader.close()
            self._readers.clear()
            self._dirty.clear()
            self._member.leave()
            self._watcher.close()
