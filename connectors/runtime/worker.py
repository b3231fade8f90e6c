"""One worker of a connector: a consumer-group member feeding its own sink instance.

The sink is built with the worker, before the threads start (a missing extra stops the
connector there, before any worker runs); the worker's thread opens it. Per batch:
decode and coalesce, write (retrying, isolating refused events), flush, append dead
letters, and only then commit the offsets. On stop the batch in hand is finished the
same way; if that cannot be done (the sink is down), it is left uncommitted and will be
delivered again (sinks are idempotent).

Batches are written while the next ones are read and decoded: the writes and flushes run
in one sender thread (they wait on the sink's server, without the interpreter lock),
one batch after the other, in order, while this thread polls and decodes. Up to
``IN_FLIGHT`` batches are handed over: one being written and the next queued behind it,
so the sink's server goes from one batch to the next without waiting for this thread;
batches are finished (dead letters, commit) in order, each once its write returned. A
rebalance in a later poll may take a partition of a batch in flight away before that
batch is committed: its new owner then delivers those events again, as after any crash
(versioned writes make that harmless). When a write fails, the batches behind it may
still be written; none of them is committed, and the events are delivered again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from cdc.config import ConnectorConfig
from cdc.errors import ConfigError
from cdc.extras import MissingExtraError
from cdc.log import (
    Backpressure,
    BackpressurePolicy,
    Consumer,
    Log,
    Message,
    StartAt,
    TopicPartition,
)
from cdc.observability.connector_metrics import ConnectorMetrics
from connectors.contract import Sink, SinkContext
from connectors.joins import JoinedSink

from .collector import IDLE_POLL_S, BatchCollector
from .dead_letter import DeadLetter, DeadLetterWriter
from .delivery import BatchDelivery
from .errors import StopRequested, describe
from .events import DecodedBatch, decode_batch, next_offsets
from .retry import Retrier
from .sinks import build_sink

log = logging.getLogger(__name__)

IN_FLIGHT = 2


def backpressure_of(connector: ConnectorConfig) -> Backpressure:
    """The log's ``Backpressure`` for a connector's ``backpressure:`` section."""
    section = connector.backpressure
    return Backpressure(BackpressurePolicy(section.policy), section.max_lag or 0)


@dataclass(frozen=True, slots=True)
class WorkerSetup:
    """What a worker shares with its runner."""

    connector: ConnectorConfig
    log: Log
    group: str
    context: SinkContext
    dead_letters: DeadLetterWriter
    metrics: ConnectorMetrics
    retrier: Retrier
    start: StartAt
    skip_prefix: str | None  # topics a pattern may match but a connector never feeds


class ConnectorWorker:
    """Runs in its own thread until ``stop`` is set or an error ends it (``failure``)."""

    def __init__(self, setup: WorkerSetup, stop: threading.Event) -> None:
        """Build the worker's sink (not opened yet) in the thread that starts the workers.

        A sink whose extra is not installed raises ``MissingExtraError`` here, before any
        worker of the connector runs, so the command's one line is all the user sees;
        any other failure to build it is the worker's failure once it runs.
        """
        self._setup = setup
        self._stop = stop
        self.failure: BaseException | None = None
        self.dropped = 0
        self._consumer: Consumer | None = None
        self._sink: Sink | None = None
        self._build_error: Exception | None = None
        try:
            self._sink = build_sink(setup.connector, setup.context)
        except MissingExtraError:
            raise
        except Exception as exc:  # reported by run(), like a sink that cannot open
            self._build_error = exc

    def run(self) -> None:
        """The worker's thread body."""
        setup = self._setup
        connector = setup.connector
        consumer: Consumer | None = None
        sink, self._sink = self._sink, None
        try:
            if sink is None:
                raise self._build_error or RuntimeError("ConnectorWorker.run called twice")
            consumer = self._consumer = setup.log.consumer(
                setup.group, topics=connector.topics or (), start=setup.start,
                pattern=connector.topic_pattern, backpressure=backpressure_of(connector))
            setup.retrier.call("open", sink.open)
            self._loop(consumer, sink)
        except StopRequested:
            log.info("%s: stopped while retrying; the batch in hand stays uncommitted",
                     connector.name, extra={"connector": connector.name})
        except ConfigError as exc:  # a setting to fix: the command's one line says it
            self.failure = exc
        except Exception as exc:  # reported by the runner; offsets stay uncommitted
            self.failure = exc
            log.error("%s: worker %d stopped: %s", connector.name, setup.context.worker,
                      describe(exc), extra={"connector": connector.name}, exc_info=exc)
        finally:
            if sink is not None:
                self._close_sink(sink)
            if consumer is not None:
                consumer.close()

    @property
    def consumer_problem(self) -> str | None:
        """What the log's client reports going wrong while it reads (a Kafka login
        refused, brokers out of reach), if it says (a ``problem`` attribute)."""
        problem = getattr(self._consumer, "problem", None)
        return problem if isinstance(problem, str) else None

    def _close_sink(self, sink: Sink) -> None:
        try:
            sink.close()
        except Exception as exc:  # closing must not hide why the worker ended
            log.warning("%s: closing the sink failed: %s", self._setup.connector.name,
                        describe(exc), extra={"connector": self._setup.connector.name})

    def _loop(self, consumer: Consumer, sink: Sink) -> None:
        connector = self._setup.connector
        collector = BatchCollector(consumer, batch_size=connector.batch_size,
                                   batch_timeout=connector.batch_timeout.total_seconds(),
                                   stop=self._stop)
        delivery = BatchDelivery(sink, self._setup.retrier)
        in_flight: deque[InFlight] = deque()
        with ThreadPoolExecutor(1, thread_name_prefix=f"{connector.name}-sender") as sender:
            try:
                while not self._stop.is_set():
                    # with batches in flight, only what is there already: a batch is
                    # finished (dead letters, commit) soon after its write returns
                    messages = collector.collect(0.0 if in_flight else IDLE_POLL_S)
                    if messages and isinstance(sink, JoinedSink):
                        messages = sink.admit(messages, consumer, self._start_offset,
                                              self._partition_count)
                    self._count_dropped(consumer)
                    if messages:
                        in_flight.append(self.send(self.prepare(messages, sink), delivery,
                                                   sender))
                    while in_flight and (not messages or len(in_flight) > IN_FLIGHT
                                         or in_flight[0].done()):
                        # popped first: a failure to finish it must not finish it again
                        self.finish(in_flight.popleft(), consumer)
                    if not messages and not in_flight and isinstance(sink, JoinedSink):
                        self._write_deferred(sink)
                while in_flight:  # stopping: the batches in hand, finished as any other
                    self.finish(in_flight.popleft(), consumer)
            except BaseException:
                # a batch could not be finished: the ones behind it must not be committed
                # (their offsets would cover its events); they are delivered again
                for batch in in_flight:
                    if batch.delivered is not None:
                        batch.delivered.cancel()
                raise

    def _write_deferred(self, sink: JoinedSink) -> None:
        """Idle: write the records joined views deferred while catching up; dead-letter
        the ones refused."""
        setup = self._setup
        refused = setup.retrier.call("write of deferred joined records", sink.write_deferred)
        if refused:
            letters = [DeadLetter(r.event.message, r.reason, "Rejection") for r in refused]
            setup.retrier.call("dead-letter append", lambda: setup.dead_letters.write(letters))
            setup.metrics.dead_letters.inc(len(letters))
            for letter in letters:
                self._log_dead_letter(letter)

    def _partition_count(self, topic: str) -> int:
        """How many partitions ``topic`` has."""
        return len(self._setup.log.admin().partitions(topic))

    def _start_offset(self, where: TopicPartition) -> int:
        """The first offset ``where`` still holds."""
        for info in self._setup.log.admin().partitions(where.topic):
            if info.partition == where.partition:
                return info.start_offset
        return 0

    def _count_dropped(self, consumer: Consumer) -> None:
        dropped = int(getattr(consumer, "dropped", 0))
        if dropped > self.dropped:
            self._setup.metrics.dropped.inc(dropped - self.dropped)
            self.dropped = dropped

    def prepare(self, messages: Sequence[Message], sink: Sink | None = None) -> InFlight:
        """Decode and coalesce a polled batch (before the previous one is finished), and
        let ``sink`` prepare it if it can (``PreparingSink``)."""
        setup = self._setup
        setup.metrics.messages_read.inc(len(messages))
        fed = [m for m in messages
               if setup.skip_prefix is None or not m.topic.startswith(setup.skip_prefix)]
        decoded = decode_batch(fed, coalesced=not isinstance(sink, JoinedSink))
        prepare = getattr(sink, "prepare", None)
        if prepare is not None and decoded.events:
            try:
                decoded.events = prepare(decoded.events)
            except Exception as exc:  # the write does the work again, and reports it
                log.debug("%s: preparing a batch failed: %s", setup.connector.name,
                          describe(exc), extra={"connector": setup.connector.name})
        return InFlight(messages, decoded, time.monotonic())

    def send(self, batch: InFlight, delivery: BatchDelivery,
             sender: ThreadPoolExecutor) -> InFlight:
        """Hand ``batch`` to the sender thread: written and flushed while the next one is
        read."""
        if batch.decoded.events:
            batch.delivered = sender.submit(delivery.deliver, batch.decoded.events)
        return batch

    def finish(self, batch: InFlight, consumer: Consumer) -> None:
        """Wait for ``batch``'s write and flush; dead-letter what was refused; commit."""
        setup = self._setup
        refused = batch.delivered.result() if batch.delivered is not None else []
        letters = [DeadLetter(message, reason, "EventDecodeError")
                   for message, reason in batch.decoded.undecodable] + refused
        if letters:
            setup.retrier.call("dead-letter append", lambda: setup.dead_letters.write(letters))
            setup.metrics.dead_letters.inc(len(letters))
            for letter in letters:
                self._log_dead_letter(letter)
        offsets = next_offsets(batch.messages)
        setup.retrier.call("offset commit", lambda: consumer.commit(offsets))
        setup.metrics.events_written.inc(len(batch.decoded.events) - len(refused))
        setup.metrics.batches.inc()
        setup.metrics.batch_seconds.observe(time.monotonic() - batch.started)

    def _log_dead_letter(self, letter: DeadLetter) -> None:
        name = self._setup.connector.name
        message = letter.message
        log.warning("%s: event %s[%d]@%d sent to %s: %s", name, message.topic,
                    message.partition, message.offset, self._setup.dead_letters.topic,
                    letter.reason, extra={"connector": name, "topic": message.topic,
                                          "partition": message.partition,
                                          "offset": message.offset})


@dataclass(slots=True)
class InFlight:
    """A polled batch on its way: its messages, what decoding made of them, when it was
    polled, and its write and flush in the sender thread (None: nothing to write)."""

    messages: Sequence[Message]
    decoded: DecodedBatch
    started: float
    delivered: Future[list[DeadLetter]] | None = None

    def done(self) -> bool:
        """True when its write returned (or there was nothing to write)."""
        return self.delivered is None or self.delivered.done()
