"""The streaming loop of one replication session, step by step.

Each turn of ``StreamLoop.run``:

1. ``read``: what arrived on the replication connection, handed over at once;
2. ``convert``: the plain messages (row changes, Begin, Commit, streamed-transaction
   frames) through the native core in one call, the others decoded and assembled one by
   one (``keepalive`` and ``change``), a committed streamed transaction drained in chunks;
3. ``commit``: the batch is appended and acknowledged when group commit says it is full
   or due (``GroupCommit``), or when the stream pauses (``idle``);
4. ``housekeeping``: slot health and new tables every few seconds, the next chunk of an
   incremental snapshot, a progress line.

Appending, acknowledging and the source checks are the ``Committer``'s (the capture's):
this loop only decides *when*.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Protocol

from ..lsn import format_lsn
from ..pgoutput import (
    Begin,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    Message,
    PgOutputDecoder,
    StreamCommit,
    StreamStart,
    StreamStop,
    Update,
)
from ..snapshot.incremental import IncrementalSnapshots
from .batching import GroupCommit
from .native import NativeChanges
from .replication import Keepalive, ReplicationConnection, XLogData, parse_copy_message
from .transactions import TransactionAssembler

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 10.0
# messages after which the tables the native core converts are still current
_KEEPS_SHAPES = frozenset({Begin, Commit, Insert, Update, Delete, StreamStart, StreamStop})


class Committer(Protocol):
    """What the loop asks of the capture."""

    def flush(self, commit_ts_us: int) -> None:
        """Append the assembler's ready records durably, then acknowledge."""

    def acknowledge(self, lsn: int, *, force: bool = False) -> None:
        """Confirm ``lsn`` to PostgreSQL (``force``: send the status even if unchanged)."""

    def heartbeat(self) -> bool:
        """Write a WAL record the slot can advance past; False when not allowed."""

    def check_source(self) -> None:
        """The periodic checks: slot health, tables newly selected by the patterns."""


@dataclass(frozen=True, slots=True)
class LoopSettings:
    """The loop's timings (from ``CaptureSettings``)."""

    batch_delay_s: float
    backlog_batch_events: int
    batch_bytes: int
    heartbeat_s: float | None
    slot: str
    source_check_s: float = 10.0  # committer.check_source every this often


class StreamStats(Protocol):
    """The capture's statistics the loop updates and logs."""

    server_lsn: int
    received_lsn: int
    acked_lsn: int
    events: int


@dataclass(slots=True)
class StreamLoop:
    """One session's loop (see the module docstring)."""

    repl: ReplicationConnection
    decoder: PgOutputDecoder
    assembler: TransactionAssembler
    group: GroupCommit
    committer: Committer
    stats: StreamStats
    settings: LoopSettings
    incremental: IncrementalSnapshots | None = None
    stop_when_snapshots_done: bool = False
    native: NativeChanges = field(init=False)
    commit_ts_us: int = 0  # commit time (pgoutput clock) of the last transaction seen
    batch_started: float = 0.0
    last_data: float = field(default_factory=time.monotonic)
    next_status: float = 0.0  # set from settings.source_check_s
    next_progress: float = field(default_factory=lambda: time.monotonic() + PROGRESS_EVERY_S)

    def __post_init__(self) -> None:
        self.next_status = time.monotonic() + self.settings.source_check_s
        self.native = NativeChanges(self.decoder, self.assembler)

    def run(self, stop: threading.Event) -> None:
        """Turn until ``stop`` is set; then flush what is ready."""
        while not stop.is_set():
            # group commit: while changes keep coming, gather them; flush as soon as the
            # stream pauses for batch_delay_s
            timeout = self.settings.batch_delay_s if self.assembler.ready else 0.5
            raw = self.repl.read_raw(timeout)
            now = time.monotonic()
            if raw:
                self.convert(raw, now)
            else:
                self.idle(now)
            self.housekeeping(now, stop)
        if self.assembler.ready:
            self.flush()

    # -- converting ------------------------------------------------------------------
    def convert(self, raw: list[memoryview], now: float) -> None:
        """Every message of ``raw``: runs of plain ones natively, the others one by one."""
        index = 0
        while index < len(raw):
            index = self.convert_natively(raw, index, now)
            if index >= len(raw):
                break
            message = parse_copy_message(raw[index])
            index += 1
            if isinstance(message, Keepalive):
                self.keepalive(message)
            else:
                self.change(message, now)

    def convert_natively(self, raw: list[memoryview], index: int, now: float) -> int:
        """The plain messages from ``index`` on in one native call (Python takes the
        others; incremental snapshots watch Begins while they read); where it stopped."""
        native = self.native
        had_ready = bool(self.assembler.ready)
        taken = native.feed_batch(raw, index, begins=self.incremental is None
                                  or not self.incremental.active)
        if taken == index:
            return index
        self.last_data = now
        self.stats.received_lsn = native.received_lsn
        self.commit_ts_us = native.commit_ts or self.commit_ts_us
        if not had_ready and self.assembler.ready:
            self.batch_started = now
        self.advance_when_idle(native.received_lsn)
        self.commit_if_due(now)
        return taken

    def keepalive(self, message: Keepalive) -> None:
        """The server's position; acknowledged at once when nothing is pending."""
        self.stats.server_lsn = max(self.stats.server_lsn, message.wal_end)
        assembler = self.assembler
        if message.reply_requested and assembler.ready:
            self.flush()  # it wants our position now
        if assembler.idle and not assembler.ready:
            assembler.ack_lsn = max(assembler.ack_lsn, message.wal_end)
            self.committer.acknowledge(assembler.ack_lsn)
        if message.reply_requested:
            self.committer.acknowledge(self.stats.acked_lsn, force=True)

    def change(self, message: XLogData, now: float) -> None:
        """One message the native core did not take: decoded and assembled."""
        self.last_data = now
        self.stats.received_lsn = message.end_lsn  # the server's WAL end as sent
        if not self.assembler.ready:
            self.batch_started = now
        self.assemble(self.decoder.decode(bytes(message.payload)), message.start_lsn)
        self.advance_when_idle(message.end_lsn)  # e.g. past a heartbeat message
        self.drain()
        self.commit_if_due(now)

    def assemble(self, decoded: Message, wal_lsn: int) -> None:
        """A decoded message into the assembler, and to whoever watches it."""
        self.assembler.feed(decoded, wal_lsn)
        if type(decoded) not in _KEEPS_SHAPES:
            self.native.forget_tables()  # e.g. a Relation: a new shape
        if self.assembler.rewritten or self.assembler.altered:
            self.reread_rewritten()
        incremental = self.incremental
        if incremental is not None and incremental.observe(decoded):
            self.flush()  # what came before, first
            incremental.handle(decoded)
        if isinstance(decoded, (Commit, StreamCommit, CommitPrepared)):
            self.commit_ts_us = decoded.commit_ts

    def reread_rewritten(self) -> None:
        """Tables whose rows a schema change altered without writing them: read them
        again (``IncrementalSnapshots.rows_rewritten``), and tables an ``ALTER TABLE``
        DDL message names: compare their columns now (``table_altered``)."""
        rewritten, self.assembler.rewritten = self.assembler.rewritten, []
        altered, self.assembler.altered = self.assembler.altered, []
        for change in rewritten:
            if self.incremental is not None:
                self.incremental.rows_rewritten(change.table, change.reason, change.lsn,
                                                change.signature)
            else:
                log.warning("%s: a schema change %s, but this capture cannot read tables "
                            "while streaming (a standby without source.primary_dsn): rows "
                            "not written since keep their old values downstream",
                            change.table, change.reason, extra={"slot": self.settings.slot})
        for table in altered:  # a standby's are warned of at the table's next Relation
            if self.incremental is not None:
                self.incremental.table_altered(table.identity, table.lsn)

    def drain(self) -> None:
        """A committed streamed transaction's records, a chunk per durable append (its
        records were late anyway: chunks as big as while catching up)."""
        while self.assembler.draining:
            self.native.drain(self.settings.backlog_batch_events, self.settings.batch_bytes)
            self.flush()

    # -- committing ------------------------------------------------------------------
    def advance_when_idle(self, lsn: int) -> None:
        """Between transactions with nothing pending, the position may move to ``lsn``."""
        assembler = self.assembler
        if assembler.idle and not assembler.ready and lsn > assembler.ack_lsn:
            assembler.ack_lsn = lsn

    def commit_if_due(self, now: float) -> None:
        """Append and acknowledge when the batch is full or has waited long enough."""
        ready = self.assembler.ready
        if ready and (self.group.full(ready, self.commit_ts_us)
                      or self.group.due(now - self.batch_started, self.commit_ts_us)):
            self.flush()

    def idle(self, now: float) -> None:
        """Nothing arrived: flush what is ready, or write a heartbeat when it is time."""
        if self.assembler.ready:
            self.flush()
        elif self.settings.heartbeat_s and now - self.last_data >= self.settings.heartbeat_s:
            if not self.committer.heartbeat():
                self.settings = _without_heartbeats(self.settings)  # keepalives do then
            self.last_data = now

    def flush(self) -> None:
        """Append the ready records and acknowledge (the committer's)."""
        self.committer.flush(self.commit_ts_us)

    # -- housekeeping ----------------------------------------------------------------
    def housekeeping(self, now: float, stop: threading.Event) -> None:
        """The periodic work between turns (see the module docstring)."""
        if now >= self.next_status:
            self.next_status = now + self.settings.source_check_s
            self.committer.check_source()
            assembler = self.assembler
            if not assembler.ready and assembler.ack_lsn > self.stats.acked_lsn:
                self.committer.acknowledge(assembler.ack_lsn)
            self.committer.acknowledge(self.stats.acked_lsn, force=True)
        else:  # a status update when one is due as a sign of life (``replicas``)
            self.committer.acknowledge(self.stats.acked_lsn)
        incremental = self.incremental
        if incremental is not None:
            incremental.tick()  # the next chunk of an incremental snapshot
            if self.stop_when_snapshots_done and not incremental.active:
                log.info("initial_only: every table is read; stopping",
                         extra={"slot": self.settings.slot})
                stop.set()
        if now >= self.next_progress:
            self.next_progress = now + PROGRESS_EVERY_S
            log.info("capture at %s: %d events, acknowledged %s",
                     format_lsn(self.stats.server_lsn), self.stats.events,
                     format_lsn(self.stats.acked_lsn), extra={"slot": self.settings.slot})


def _without_heartbeats(settings: LoopSettings) -> LoopSettings:
    return replace(settings, heartbeat_s=None)
