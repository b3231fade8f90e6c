"""Before streaming: the slot created or checked, the initial snapshot taken or finished.

- A new slot exports a snapshot; the published tables are read in it (``snapshot_read``)
  and each batch of tables read is recorded. When the log already holds a table (the
  slot was dropped outside the capture, or lost and re-created with
  ``--recreate-lost-slot``), a truncate event precedes the table's rows, so no derived
  system keeps a row the database deleted while no slot recorded it.
- An existing slot whose initial snapshot was interrupted is kept (never dropped): the
  tables not recorded as read are requested as incremental snapshots, performed while
  streaming from the slot's position (``snapshot_resume``).
  PostgreSQL 13 cannot (no logical decoding messages, so no watermarks): there the slot,
  never streamed from, is dropped and the snapshot taken again on a new one, each table
  already in the log after a truncate event.
- A slot the log knows nothing of (created by hand) is streamed as it is.
- A slot the log shows this capture streamed from (its initial snapshot completed, or
  this process streamed from it) that the server does not have is *missing*: dropped, or
  a failover to a server it was not synchronised to. The capture stops
  (``SlotMissingError``) unless ``--recreate-lost-slot`` says to create a new one and
  snapshot the tables again (truncate events first, as above). A brand-new pipeline (no
  history) simply creates its slot.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg

from cdc.config import PipelineConfig
from cdc.errors import SourceError
from cdc.log import NO_POSITION, Log, Producer

from ..lsn import format_lsn
from ..schema.shapes import KnownSchema, ShapeRegistry
from ..snapshot.incremental_log import read_records, table_states
from ..snapshot.initial import mark_completed, mark_started, mark_tables_read, published_tables
from ..snapshot.read import read_tables
from ..snapshot.resume import (
    InitialSnapshot,
    initial_snapshot,
    request_records,
    tables_to_stream,
)
from . import session
from .messages import sends_messages
from .slot import drop_lost_slot, ensure_slot, read_slot, split_table
from .wal_safety import RECREATE_FLAG, SlotMissingError, advance_wal_past

log = logging.getLogger(__name__)


@dataclass
class SlotStart:
    """Prepares the slot of one capture session (see the module docstring)."""

    config: PipelineConfig
    event_log: Log
    producer: Producer
    known_versions: Callable[[], Mapping[str, KnownSchema]]
    rows: int = 0  # rows the initial snapshot read
    snapshot_taken: bool = False  # a new slot's initial snapshot ran in this session
    incremental_pending: bool = False  # incremental snapshots remain to be performed
    streamed: list[str] = field(default_factory=list)  # tables left to the stream

    def prepare(self, conn: psycopg.Connection[Any], dsn: str, recreate_lost_slot: bool,
                known_complete: bool = False, streamed_before: bool = False) -> str:
        """Create or check the slot, take or finish the initial snapshot; returns the
        snapshot mode in effect (``initial`` after a lost or missing slot was re-created).
        ``known_complete``: this process already saw the slot's snapshot complete (a
        reconnect), whatever a read of the log may say now; ``streamed_before``: this
        process streamed from the slot. Raises ``SlotMissingError`` when the slot has such
        a history but is gone, unless ``recreate_lost_slot``."""
        source = self.config.source
        mode = source.snapshot
        records = read_records(self.event_log, self.config.topic_prefix)
        recorded = initial_snapshot(records, source.slot)
        if known_complete:
            recorded.state = "completed"
        exists = read_slot(conn, source.slot) is not None
        if not exists and (recorded.state == "completed" or streamed_before):
            last = self._last_logged_lsn()
            if not recreate_lost_slot:
                raise SlotMissingError(source.slot, format_lsn(last) if last else None)
            log.warning("replication slot %s is missing (%s): a new slot is created and the "
                        "tables are snapshotted again", source.slot, RECREATE_FLAG,
                        extra={"slot": source.slot})
            advance_wal_past(conn, last)  # a promoted standby may be behind the log
            mode = "initial" if mode == "never" else mode  # the changes missed: re-read
        elif recreate_lost_slot and drop_lost_slot(conn, source.slot):
            exists = False
            mode = "initial" if mode == "never" else mode  # the changes missed: re-read
        if mode == "never":
            ensure_slot(conn, dsn, source.slot, two_phase=source.two_phase,
                        failover=source.failover_slot)
            return mode
        if exists and recorded.state == "started" and not sends_messages(
                conn.info.server_version):
            exists = not _drop_unstreamed_slot(conn, source.slot)
        active = {t for t, s in table_states(records).items() if s.active}
        if exists and recorded.state == "started":
            active |= set(self._finish_interrupted(conn, recorded, active))
        elif exists and recorded.state is None:
            log.warning("slot %s was not created by this service: streaming from it without "
                        "an initial snapshot", source.slot, extra={"slot": source.slot})

        def snapshot(consistent_point: int, snapshot_name: str) -> None:
            active.update(self._snapshot(conn, dsn, consistent_point, snapshot_name))

        ensure_slot(conn, dsn, source.slot, on_created=snapshot, two_phase=source.two_phase,
                    failover=source.failover_slot)
        self.incremental_pending = bool(active)
        return mode

    def _last_logged_lsn(self) -> int:
        """The highest commit LSN of the pipeline's topics in the log (0: none)."""
        prefix = f"{self.config.topic_prefix}."
        highest = NO_POSITION
        for topic in self.event_log.admin().topics():
            if topic.startswith(prefix) and not self.config.is_dead_letter_topic(topic):
                highest = max(highest, *self.producer.last_positions(topic).values(),
                              NO_POSITION)
        return highest.commit_lsn

    def _finish_interrupted(self, conn: psycopg.Connection[Any], recorded: InitialSnapshot,
                            active: set[str]) -> list[str]:
        source, prefix = self.config.source, self.config.topic_prefix
        published = [f"{s}.{t}" for s, t in
                     published_tables(conn, source.publication, source.tables)]
        pending = tables_to_stream(recorded, published, active)
        if pending:  # durable before the snapshot is recorded complete
            self.producer.append(request_records(prefix, pending))
        planned = recorded.tables if recorded.tables is not None else published
        mark_completed(self.producer, prefix, source.slot, recorded.consistent_point,
                       [split_table(t) for t in planned], 0, pending)
        log.warning("the initial snapshot of slot %s was interrupted: %d of its %d tables "
                    "were read; the slot is kept and the other %d are read while streaming "
                    "from its position (incremental snapshots)", source.slot,
                    len(recorded.read), len(planned), len(pending),
                    extra={"slot": source.slot})
        self.streamed = pending
        return pending

    def _snapshot(self, conn: psycopg.Connection[Any], dsn: str, consistent_point: int,
                  snapshot_name: str) -> list[str]:
        source, prefix, slot = self.config.source, self.config.topic_prefix, \
            self.config.source.slot
        tables = published_tables(conn, source.publication, source.tables)
        topics = {f"{s}.{t}": self.config.topic_for(s, t) for s, t in tables}
        existing = set(self.event_log.admin().topics())
        truncate_first = frozenset(name for name, topic in topics.items()
                                   if topic in existing)
        if truncate_first:
            log.warning("slot %s is new but the log already holds %d of its tables: each "
                        "one's snapshot starts with a truncate event, so rows deleted while "
                        "no slot recorded changes do not survive downstream", slot,
                        len(truncate_first), extra={"slot": slot})
        self.event_log.admin().create_topics(list(topics.values()))  # Kafka: batched
        mark_started(self.producer, prefix, slot, consistent_point, tables)
        with session.connect(dsn) as catalog_conn:
            shapes = ShapeRegistry(catalog_conn, self.config.topic_names,
                                   self.known_versions())
            outcome = read_tables(
                dsn, snapshot_name, consistent_point, shapes=shapes, producer=self.producer,
                tables=tables, database=source.database or "",
                workers=source.snapshot_parallel_tables, truncate_first=truncate_first,
                publication=source.publication,
                range_bytes=(source.snapshot_range_mb << 20
                             if source.snapshot_range_mb is not None else None),
                on_tables_read=lambda done: mark_tables_read(self.producer, prefix, slot,
                                                             consistent_point, done),
                on_deferred=lambda table: self.producer.append(request_records(prefix,
                                                                               [table])))
        mark_completed(self.producer, prefix, slot, consistent_point, tables, outcome.rows,
                       outcome.deferred)
        self.rows += outcome.rows
        self.snapshot_taken = True
        self.streamed = outcome.deferred
        return outcome.deferred


def _drop_unstreamed_slot(conn: psycopg.Connection[Any], slot: str) -> bool:
    """PostgreSQL 13: drop the slot of an interrupted initial snapshot (nothing was
    streamed from it) so the snapshot is taken again; True once dropped."""
    log.warning("the initial snapshot of slot %s was interrupted, and PostgreSQL %d cannot "
                "finish it while streaming (incremental snapshots need logical decoding "
                "messages: PostgreSQL 14+); the slot, never streamed from, is dropped and the "
                "snapshot taken again on a new one", slot, conn.info.server_version // 10000,
                extra={"slot": slot})
    try:
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    except psycopg.errors.ObjectInUse as exc:  # the interrupted process's session lingers
        raise SourceError(f"replication slot {slot!r} is still in use "
                          f"({str(exc).strip()}); retrying") from None
    return True
