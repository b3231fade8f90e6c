"""The capture: PostgreSQL's logical replication stream → durable log records → ack.

One session = one replication connection. Records are appended in groups (several
small transactions per durable append); only after ``append`` returned is the end LSN
of the last complete transaction acknowledged (invariant 1). Keepalive positions are
acknowledged only when nothing is pending. On a connection failure the session ends and
``run`` reconnects with exponential backoff; the resume filter then drops what PostgreSQL
resends and the log already holds (invariant 2).
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import psycopg

from cdc.backoff import ExponentialBackoff
from cdc.config import PipelineConfig
from cdc.crashpoints import crash_point
from cdc.errors import ConfigError, ConfigProblem, LogFencedError, SlotInUseError, SourceError
from cdc.log import Log

from .fallbacks import FALLBACKS, DecodeFallbacks
from .pgoutput import PgOutputDecoder
from .schema.ddl import DDL_PREFIX
from .schema.shapes import ShapeRegistry, versions_from_log
from .schema.topics import check_published_topics, published_tables
from .snapshot.incremental import IncrementalSnapshots
from .snapshot.incremental_log import read_records
from .source import session
from .source.checks import refuse_sql_ascii, source_address, without_secrets
from .source.ddl_race import raced_ddl
from .source.messages import incremental_refusal, require_outbox_messages
from .source.publication import sync_publication
from .source.refusals import configuration_refusal
from .source.replicas import Standby, Takeover
from .source.slot import check_slot_health, slot_two_phase
from .source.slot_start import SlotStart
from .source.standby import nudge_primary, prepare_publication, source_role
from .stream.batching import BatchLimits, GroupCommit
from .stream.loop import LoopSettings, StreamLoop
from .stream.replication import ReplicationConnection, now_pg_micros
from .stream.resume import ResumeFilter
from .stream.spool import StreamSpool
from .stream.transactions import TransactionAssembler

log = logging.getLogger(__name__)

HEARTBEAT_PREFIX = "distributary.heartbeat"
_TOPIC_OF = itemgetter(0)  # Record.topic


@dataclass(frozen=True, slots=True)
class CaptureSettings:
    """Batching and retry tunables."""

    batch_events: int = 5_000
    # flush when the stream pauses this long (2 ms: 5 ms was most of a row's time from
    # commit to Redis at 2,000 rows/s; a batch still gathers while its fsync runs) …
    batch_delay_s: float = 0.002
    batch_max_age_s: float = 0.05  # … or when the oldest record waited this long …
    # catching up (the last commit seen is backlog_lag_s behind the clock), a batch waits
    # up to backlog_max_age_s and fills up to backlog_batch_events or batch_bytes: fewer
    # fsyncs and per-partition writes when throughput is what matters (``batching``)
    backlog_lag_s: float = 1.0
    backlog_max_age_s: float = 1.0
    backlog_batch_events: int = 20_000
    backlog_spread_events: int = 100_000  # … or more, over many topics (``batching``)
    batch_bytes: int = 32 << 20
    wal_budget_bytes: int = 1 << 30  # WAL a blocking consumer may make PostgreSQL keep
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    recreate_lost_slot: bool = False  # drop a lost slot, re-create it and re-snapshot
    takeover_after_s: float = 6.0  # a silent replica's slot is taken over (``replicas``)
    alive_every_s: float = 1.0  # a status update at least this often: the sign of life
    source_check_s: float = 10.0  # slot health and tables the patterns newly select
    new_tables_check_s: float = 10.0  # tables that joined the publication


@dataclass(slots=True)
class CaptureStats:
    """What the capture did so far (for logs and metrics)."""

    events: int = 0
    acked_lsn: int = 0
    server_lsn: int = 0
    sessions: int = 0
    skipped_on_resume: int = 0
    streaming: bool = False  # a replication session is streaming (read by /healthz)
    standby: bool = False  # another replica streams the slot; this one waits to take over
    takeover_seconds: list[float] = field(default_factory=list)  # each, from its last life
    received_lsn: int = 0  # the server's WAL end as of the last change message
    commit_ts_us: int = 0  # commit time (pgoutput clock) of the last transaction appended
    events_by_topic: Counter[str] = field(default_factory=Counter)  # streamed, per topic
    decode_fallbacks: DecodeFallbacks = field(default_factory=lambda: FALLBACKS)  # as text
    last_failure: str | None = None  # why the last session ended, until one streams again
    log_problem: Callable[[], str | None] = lambda: None  # why appends wait (the log's word)


def writer_id(config: PipelineConfig) -> str:
    """The capture's identity on the log, the same for every replica of the pipeline."""
    return f"distributary.capture.{config.topic_prefix}.{config.source.slot}"


class Capture:
    """Streams one slot into the log until ``stop`` is set."""

    def __init__(self, config: PipelineConfig, event_log: Log,
                 settings: CaptureSettings | None = None) -> None:
        self.config = config
        self.log = event_log
        self.settings = settings or CaptureSettings()
        self._reconnect_backoff = ExponentialBackoff(self.settings.backoff_initial_s,
                                                     self.settings.backoff_max_s)
        self.stats = CaptureStats()
        self.producer = event_log.producer(writer_id(config))
        # a producer that retries inside ``append`` (Kafka) says why while it does
        self.stats.log_problem = lambda: getattr(self.producer, "problem", None)
        self._next_block_check = 0.0
        self.snapshot_only_done = False
        self._blocked = False
        self._group = GroupCommit(BatchLimits(
            self.settings.batch_events, self.settings.batch_max_age_s,
            self.settings.backlog_lag_s, self.settings.backlog_max_age_s,
            self.settings.backlog_batch_events, self.settings.batch_bytes,
            self.settings.backlog_spread_events), now_pg_micros)
        self._incremental: IncrementalSnapshots | None = None
        self._resnapshot = False
        self._stop_when_snapshots_done = False  # initial_only, incremental snapshots left
        self._slot_prepared = False  # the slot's initial snapshot is settled in this process
        self._standby = Standby(config.source.slot, self.settings.takeover_after_s)
        self._takeover: Takeover | None = None  # the wait before the current session
        self._next_alive = 0.0  # when the next status update is due as a sign of life

    def run(self, stop: threading.Event) -> None:
        """Capture until ``stop``; reconnect with backoff after source failures."""
        failures = 0  # sessions in a row that ended on a source failure
        while not stop.is_set():
            started = time.monotonic()
            try:
                self._session(stop)
            except LogFencedError as exc:
                log.warning("%s: another replica streams now; this one stands by",
                            exc, extra={"slot": self.config.source.slot})
                self._standby.fenced()
                failures = 0
            except SlotInUseError as exc:  # a standby that lost the race for a free slot
                log.info("%s: another replica took it first; this one stands by", exc,
                         extra={"slot": self.config.source.slot})
                failures = 0
            except psycopg.Error as exc:
                if not (isinstance(exc, psycopg.OperationalError) or raced_ddl(exc)):
                    raise
                self._stop_when_refused(exc)
                failures = self._session_failed(exc, started, failures, stop)
            except SourceError as exc:
                failures = self._session_failed(exc, started, failures, stop)

    def _stop_when_refused(self, exc: psycopg.Error) -> None:
        """Before the first session streamed, a refusal no retry can fix (a password,
        a certificate, pg_hba.conf: ``refusals``) is a configuration error."""
        why = configuration_refusal(exc) if self.stats.sessions == 0 else None
        if why is not None:
            raise ConfigError([ConfigProblem(
                "source.dsn", f"PostgreSQL at {source_address(self.config.source.dsn)} "
                f"refused the connection: {why}")]) from exc

    def _session_failed(self, exc: Exception, started: float, failures: int,
                        stop: threading.Event) -> int:
        """Log why the session ended (a lost server, or DDL that kept racing a catalog
        query), wait the backoff of one more failure in a row; return that count (a
        session that streamed over 30 s counts from one again)."""
        failures = 1 if time.monotonic() - started > 30 else failures + 1
        delay = self._reconnect_backoff.delay(failures)
        self.stats.last_failure = without_secrets(str(exc), self.config.source)[:300]
        if self.stats.sessions == 0:  # never streamed: say where it tried to go
            log.warning("cannot start: PostgreSQL at %s (source.dsn) failed: %s; "
                        "retrying in %.1f s", source_address(self.config.source.dsn),
                        exc, delay, extra={"slot": self.config.source.slot})
        else:
            log.warning("replication interrupted: %s; reconnecting in %.1f s", exc,
                        delay, extra={"slot": self.config.source.slot})
        stop.wait(delay)
        return failures

    # -- one session ------------------------------------------------------------------
    def _session(self, stop: threading.Event) -> None:
        source = self.config.source
        dsn = source.conninfo()
        with session.connect(dsn) as conn:
            refuse_sql_ascii(conn)
            require_outbox_messages(conn.info.server_version, source.messages_prefixes)
            role = source_role(conn, source)
            prepare_publication(conn, role, source)
            check_published_topics(conn, source.publication, self.config.topic_names)
            self.stats.standby = True
            self._takeover = self._standby.wait(conn, stop)
            if self._takeover is None:
                return  # stopped while standing by
            self.stats.standby = False
            self.producer.claim()  # from now on, nothing a replica before wrote can land
            with nudge_primary(role):  # a slot created on a standby waits for the primary
                self._prepare_slot(conn, dsn)
        if self.snapshot_only_done:
            stop.set()
            return
        catalog_conn = session.connect(dsn)
        # where heartbeats and publication changes are written: the source, or on a
        # standby the primary (source.primary_dsn, connected below), or nowhere
        write_conn = None if role.standby else catalog_conn
        spool = StreamSpool.for_process(
            Path(tempfile.gettempdir()) / f"distributary-spool-{source.slot}")
        repl = ReplicationConnection(dsn)
        self.stats.sessions += 1
        try:
            if role.standby and role.write_dsn is not None:
                write_conn = session.connect(role.write_dsn)
            shapes = ShapeRegistry(catalog_conn, self.config.topic_names,
                                   self._known_schema_versions())
            shapes.claim_topics(published_tables(catalog_conn, source.publication))
            assembler = TransactionAssembler(
                shapes, spool, source.database or "", f"{self.config.topic_prefix}.messages",
                frozenset(source.messages_prefixes))
            assembler.topic_of_prefix[DDL_PREFIX] = f"{self.config.topic_prefix}._ddl"
            resume = ResumeFilter(self.producer, self._existing_topics())
            self._incremental = (self._incremental_snapshots(role.write_dsn, shapes)
                                 if role.write_dsn is not None else None)
            if self._incremental is not None:  # PostgreSQL 13: each fails, with the way out
                self._incremental.refusal = incremental_refusal(repl.server_version,
                                                                source.slot)
            repl.start(source.slot, [source.publication],
                       two_phase=slot_two_phase(catalog_conn, source.slot))
            decoder = PgOutputDecoder(repl.proto_version)
            self.stats.streaming = True
            self.stats.last_failure = None
            self._took_over()
            self._stream(stop, repl, decoder, assembler, resume, catalog_conn, write_conn)
        finally:
            self.stats.streaming = False
            if self._incremental is not None:
                self._incremental.close()
                self._incremental = None
            repl.close()
            spool.close()
            catalog_conn.close()
            if write_conn is not None and write_conn is not catalog_conn:
                write_conn.close()

    def _took_over(self) -> None:
        """Count a session that began after another replica held the slot."""
        takeover, self._takeover = self._takeover, None
        if takeover is not None and takeover.waited:
            seconds = takeover.seconds()
            self.stats.takeover_seconds.append(seconds)
            log.warning("took over slot %s: streaming %.1f s after the previous capture's "
                        "last sign of life", self.config.source.slot, seconds,
                        extra={"slot": self.config.source.slot})

    def _prepare_slot(self, conn: psycopg.Connection[Any], dsn: str) -> None:
        """Create or check the slot; take (or finish) the initial snapshot the mode asks
        for (``slot_start``). The capture never drops a slot PostgreSQL did not lose (but,
        on PostgreSQL 13, one it never streamed from, to retake an interrupted snapshot)."""
        start = SlotStart(self.config, self.log, self.producer, self._known_schema_versions)
        mode = start.prepare(conn, dsn, self.settings.recreate_lost_slot,
                             known_complete=self._slot_prepared,
                             streamed_before=self.stats.sessions > 0)
        self._slot_prepared = mode != "never"  # a reconnect never re-decides the snapshot
        self.stats.events += start.rows
        # an existing slot in mode "always": every table again, incrementally, when streaming
        self._resnapshot = mode == "always" and not start.snapshot_taken
        # initial_only: stop after the snapshot — once the tables left to incremental
        # snapshots (after an interruption or a rewrite) are read too
        self.snapshot_only_done = mode == "initial_only" and not start.incremental_pending
        self._stop_when_snapshots_done = mode == "initial_only"

    def _incremental_snapshots(self, dsn: str, shapes: ShapeRegistry) -> IncrementalSnapshots:
        source, prefix = self.config.source, self.config.topic_prefix
        incremental = IncrementalSnapshots.from_log(
            read_records(self.log, prefix), dsn=dsn, prefix=prefix,
            database=source.database or "", producer=self.producer, shapes=shapes,
            publication=source.publication, new_tables=source.snapshot_new_tables,
            new_tables_check_s=self.settings.new_tables_check_s,
            schema_changes=source.schema_changes)
        if self._resnapshot:
            self._resnapshot = False
            incremental.request_all()
        return incremental

    def _existing_topics(self) -> list[str]:
        prefix = f"{self.config.topic_prefix}."
        return [t for t in self.log.admin().topics()  # connectors write dead letters
                if t.startswith(prefix) and not self.config.is_dead_letter_topic(t)]

    def _known_schema_versions(self) -> dict[str, Any]:
        topic = f"{self.config.topic_prefix}._schemas"
        if topic not in self.log.admin().topics():
            return {}
        seen = [(m.key, m.value) for m in self.log.read_to_end(topic)]
        return versions_from_log(seen)

    def _stream(self, stop: threading.Event, repl: ReplicationConnection,
                decoder: PgOutputDecoder, assembler: TransactionAssembler,
                resume: ResumeFilter, catalog_conn: psycopg.Connection[Any],
                write_conn: psycopg.Connection[Any] | None) -> None:
        settings, source = self.settings, self.config.source
        heartbeat = source.heartbeat_interval
        loop = StreamLoop(
            repl, decoder, assembler, self._group,
            _SessionCommitter(self, repl, assembler, resume, catalog_conn, write_conn),
            self.stats,
            LoopSettings(settings.batch_delay_s, settings.backlog_batch_events,
                         settings.batch_bytes, heartbeat.total_seconds() if heartbeat else None,
                         source.slot, settings.source_check_s),
            self._incremental, self._stop_when_snapshots_done)
        loop.run(stop)

    def _emit_heartbeat(self, write_conn: psycopg.Connection[Any] | None) -> bool:
        """Write a tiny WAL record the slot can advance past; False if not allowed (or a
        standby without ``source.primary_dsn``: ``source_role`` said so)."""
        if write_conn is None:
            return False
        try:
            write_conn.execute("SELECT pg_logical_emit_message(false, %s, '')",
                               (HEARTBEAT_PREFIX,))
        except psycopg.errors.InsufficientPrivilege:
            log.warning("heartbeats disabled: this role may not call pg_logical_emit_message "
                        "(GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, "
                        "text) TO <role>; from PostgreSQL 17 on the function has a fourth "
                        "argument: (boolean, text, text, boolean))",
                        extra={"slot": self.config.source.slot})
            return False
        return True

    def _held_back(self) -> bool:
        """Backpressure ``block``: hold acknowledgements while a blocking consumer group
        lags beyond its bound, unless PostgreSQL would keep more WAL than the budget."""
        now = time.monotonic()
        if now >= self._next_block_check:
            self._next_block_check = now + 1.0
            self._blocked = self.log.blocking_lag_exceeded()
        if not self._blocked:
            return False
        retained = self.stats.server_lsn - self.stats.acked_lsn
        if retained > self.settings.wal_budget_bytes:
            log.warning("a blocking consumer lags, but PostgreSQL already keeps %d bytes of "
                        "WAL (budget %d): acknowledging anyway", retained,
                        self.settings.wal_budget_bytes, extra={"slot": self.config.source.slot})
            return False
        return True

    def _flush(self, repl: ReplicationConnection, assembler: TransactionAssembler,
               resume: ResumeFilter, commit_ts_us: int) -> None:
        records = assembler.ready
        assembler.ready = []
        self._group.closed()
        if self._incremental is not None:
            self._incremental.observe_records(records)
        fresh = resume.fresh(records)
        self.stats.skipped_on_resume += len(records) - len(fresh)
        if fresh:
            crash_point("before_append")
            self.producer.append(fresh)  # durable when it returns
            self.stats.events += len(fresh)
            self.stats.events_by_topic.update(map(_TOPIC_OF, fresh))
        self.stats.commit_ts_us = commit_ts_us
        crash_point("after_append")
        self._acknowledge(repl, assembler.ack_lsn, reply=False)

    def _acknowledge(self, repl: ReplicationConnection, lsn: int, *, reply: bool,
                     force: bool = False) -> None:
        if lsn > self.stats.acked_lsn and self._held_back():
            lsn = self.stats.acked_lsn
        now = time.monotonic()
        if lsn > self.stats.acked_lsn or force or now >= self._next_alive:
            self.stats.acked_lsn = max(self.stats.acked_lsn, lsn)
            repl.send_status(write=self.stats.acked_lsn, flush=self.stats.acked_lsn,
                             reply=reply)
            # at least every alive_every_s, even while nothing new is durable: standby
            # replicas take a silent one for stalled (``replicas``)
            self._next_alive = now + self.settings.alive_every_s


@dataclass(slots=True)
class _SessionCommitter:
    """The capture's side of one session's ``StreamLoop`` (its ``Committer``)."""

    capture: Capture
    repl: ReplicationConnection
    assembler: TransactionAssembler
    resume: ResumeFilter
    catalog_conn: psycopg.Connection[Any]
    write_conn: psycopg.Connection[Any] | None  # the primary's, when the source is a standby

    def flush(self, commit_ts_us: int) -> None:
        """Append the ready records durably, then acknowledge."""
        self.capture._flush(self.repl, self.assembler, self.resume, commit_ts_us)

    def acknowledge(self, lsn: int, *, force: bool = False) -> None:
        """Confirm ``lsn`` (held back while a ``block`` group lags)."""
        self.capture._acknowledge(self.repl, lsn, reply=False, force=force)

    def heartbeat(self) -> bool:
        """A WAL record the slot can advance past; False when not allowed."""
        return self.capture._emit_heartbeat(self.write_conn)

    def check_source(self) -> None:
        """Slot health, and the tables the patterns select now."""
        source = self.capture.config.source
        check_slot_health(self.catalog_conn, source.slot)
        if self.write_conn is not None:
            sync_publication(self.write_conn, source.publication, source.tables)
