"""The Kafka backend's consumer: a Kafka consumer group member, offsets in Kafka."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from cdc.errors import LogError

from ..records import Backpressure, BackpressurePolicy, Message, StartAt, StartKind, TopicPartition
from .commits import DeadlineCommitter
from .headers import to_message
from .pattern import TopicPattern
from .producer import reason
from .retry import retrying

log = logging.getLogger(__name__)

DROP_CHECK_EVERY_S = 0.5
TIMEOUT_S = 30.0
SESSION_TIMEOUT_MS = 10_000
"""A member that stops heartbeating (killed, host gone) loses its partitions after this,
as a file log's group member does: librdkafka's default (45 s) kept a killed connector's
partitions unread that long. Heartbeats come from librdkafka's own thread every 3 s, so a
slow batch never costs the membership (``max.poll.interval.ms`` covers that)."""
PROBLEM_HOLD_S = 30.0  # a client error is shown this long (librdkafka reports a refused
# login again at each reconnect, every 10 s at most), or until records come again


class KafkaConsumer:
    """A member of a Kafka consumer group; auto-commit is off, ``commit`` is explicit.

    The capture writes in transactions, so a partition holds transaction markers (and a
    fenced capture's aborted records) that ``poll`` never returns. So that a consumer
    that has everything commits the partition's end offset (lag 0, as ``cdc reconcile``
    and the lag metrics expect), a commit that covers everything polled of a partition
    commits the consumer's position, which is past them; an idle poll does the same.
    """

    def __init__(self, config: dict[str, Any], group: str, *, topics: Sequence[str] = (),
                 pattern: str | None = None, start: StartAt | None = None,
                 backpressure: Backpressure | None = None,
                 fetch_config: dict[str, Any] | None = None,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS,
                 commit_timeout_s: float = TIMEOUT_S) -> None:
        if bool(topics) == (pattern is not None):
            raise ValueError("give either topics or pattern")
        self._start = start or StartAt.committed()
        self._backpressure = backpressure or Backpressure()
        fallback = (self._start.fallback if self._start.kind is StartKind.COMMITTED
                    else self._start.kind)
        self._problem: tuple[int | None, str | None, float] = (None, None, 0.0)
        self._consumer = Consumer({
            **config, **(fetch_config or {}), "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "latest" if fallback is StartKind.LATEST else "earliest",
            "partition.assignment.strategy": "roundrobin", "error_cb": self._client_error,
            "session.timeout.ms": session_timeout_ms,
        })
        self._config = config
        self.group = group
        self._commit_timeout_s = commit_timeout_s
        self._committer: DeadlineCommitter[list[KafkaTopicPartition]] = DeadlineCommitter(
            self._commit_now, f"kafka-commit-{group}")
        self._positioned: set[TopicPartition] = set()
        self._delivered: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}  # what this member committed
        self._resume: dict[TopicPartition, int] = {}  # revoked: where this member was
        self._next_drop_check = 0.0
        self.dropped = 0
        self._pattern = TopicPattern(pattern) if pattern is not None else None
        self._subscription: list[str] = []
        self._subscribe(list(topics) if self._pattern is None
                        else self._pattern.matching(self._consumer))

    def _client_error(self, error: KafkaError) -> None:
        """librdkafka's ``error_cb`` (served while polling): it retries on its own; the
        error is kept as ``problem`` (a refusal over the connection errors that follow
        it: ``producer.reason``)."""
        code, text, _ = self._problem
        if time.monotonic() - self._problem[2] > PROBLEM_HOLD_S:
            code, text = None, None  # an old one: the new error replaces it whatever it is
        code, text = reason(code, text, error)
        self._problem = (code, text, time.monotonic())

    @property
    def problem(self) -> str | None:
        """What the client reported going wrong in the last ``PROBLEM_HOLD_S`` (a login
        refused, brokers out of reach) while no record came: the connector's reason on
        ``/healthz``; ``None`` when all is well."""
        _, text, when = self._problem
        return text if time.monotonic() - when <= PROBLEM_HOLD_S else None

    def _subscribe(self, topics: list[str]) -> None:
        """Subscribe to ``topics`` if they differ from the current subscription."""
        if topics == self._subscription:
            return
        if topics:
            self._consumer.subscribe(topics, on_assign=self._on_assign,
                                     on_revoke=self._on_revoke)
        else:
            self._consumer.unsubscribe()
        if self._subscription:
            log.info("topic pattern now matches %d topics", len(topics),
                     extra={"group": self.group})
        self._subscription = topics

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        for tp in partitions:  # back after a rebalance: go on where this member was
            key = TopicPartition(tp.topic, tp.partition)
            resumed = self._resume.pop(key, None)
            if resumed is not None:
                tp.offset = resumed
                self._delivered[key] = resumed
                self._positioned.add(key)
        if self._start.kind is not StartKind.COMMITTED:
            for tp in partitions:
                key = TopicPartition(tp.topic, tp.partition)
                if key not in self._positioned:
                    tp.offset = self._explicit_start(tp)
                    self._positioned.add(key)
        consumer.assign(partitions)

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        for tp in partitions:
            key = TopicPartition(tp.topic, tp.partition)
            delivered = self._delivered.pop(key, None)
            self._committed.pop(key, None)
            if delivered is not None:
                self._resume[key] = delivered

    def _explicit_start(self, tp: Any) -> int:
        kind = self._start.kind
        if kind is StartKind.EARLIEST:
            return int(OFFSET_BEGINNING)
        if kind is StartKind.LATEST:
            return int(OFFSET_END)
        if kind is StartKind.TIMESTAMP:
            found = self._consumer.offsets_for_times(
                [KafkaTopicPartition(tp.topic, tp.partition, self._start.timestamp_ms)],
                timeout=TIMEOUT_S)
            return int(found[0].offset) if found[0].offset >= 0 else int(OFFSET_END)
        return self._offset_for_lsn(tp.topic, tp.partition, self._start.commit_lsn)

    def _offset_for_lsn(self, topic: str, partition: int, lsn: int) -> int:
        """Binary search for the first record with commit LSN ≥ ``lsn`` (positions are
        increasing within a partition)."""
        probe = Consumer({**self._config, "group.id": f"distributary-probe-{self.group}",
                          "enable.auto.commit": False})
        try:
            low, high = retrying(partial(probe.get_watermark_offsets,
                                         KafkaTopicPartition(topic, partition),
                                         timeout=TIMEOUT_S))
            while low < high:
                middle = (low + high) // 2
                probe.assign([KafkaTopicPartition(topic, partition, middle)])
                found = probe.poll(TIMEOUT_S)
                if found is None or found.error():
                    raise LogError(f"cannot read {topic}[{partition}] at offset {middle}")
                if to_message(found).position.commit_lsn >= lsn:
                    high = middle
                else:
                    low = middle + 1
            return int(low)
        finally:
            probe.close()

    def poll(self, max_records: int = 1000, timeout: float = 1.0) -> list[Message]:
        """The next records of this member's partitions, waiting up to ``timeout`` s."""
        if self._backpressure.policy is BackpressurePolicy.DROP and \
                time.monotonic() >= self._next_drop_check:
            self._drop_excess()
        if self._pattern is not None:
            if self._pattern.due():
                try:
                    self._subscribe(self._pattern.matching(self._consumer))
                except LogError as exc:  # keep reading what is subscribed; look again later
                    log.warning("%s", exc, extra={"group": self.group})
            if not self._subscription:  # nothing matches yet: wait for topics to appear
                time.sleep(max(0.0, min(timeout, self._pattern.next_refresh
                                        - time.monotonic())))
                return []
        out: list[Message] = []
        for raw in self._consumer.consume(max_records, timeout):
            error = raw.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise LogError(f"Kafka consumer error: {error}")
            message = to_message(raw)
            out.append(message)
            self._delivered[TopicPartition(message.topic, message.partition)] = (
                message.offset + 1)
        if not out:
            self._commit_skipped()
        else:
            self._problem = (None, None, 0.0)  # records came: the client is well again
        return out

    def _commit_skipped(self) -> None:
        """Partitions whose every polled record is committed, and whose position moved past
        records ``poll`` does not return (markers, aborted ones): commit the position."""
        skipped = {tp: position for tp, delivered in self._delivered.items()
                   if self._committed.get(tp) == delivered
                   and (position := self._position(tp)) > delivered}
        if skipped:
            self.commit(skipped)

    def _position(self, tp: TopicPartition) -> int:
        found = self._consumer.position([KafkaTopicPartition(tp.topic, tp.partition)])
        return int(found[0].offset)

    def _drop_excess(self) -> None:
        self._next_drop_check = time.monotonic() + DROP_CHECK_EVERY_S
        for tp in self._consumer.assignment():
            position = self._consumer.position([tp])[0].offset
            _, high = retrying(partial(self._consumer.get_watermark_offsets, tp,
                                       timeout=TIMEOUT_S))
            if position >= 0 and high - position > self._backpressure.max_lag:
                self.dropped += high - position
                log.warning("consumer lag %d over %d: dropping to the newest",
                            high - position, self._backpressure.max_lag)
                self._consumer.seek(KafkaTopicPartition(tp.topic, tp.partition, high))

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Synchronously commit next offsets (default: just after what ``poll`` returned);
        ``KafkaCommitTimeoutError`` when the group's coordinator does not answer within
        ``commit_timeout_s``."""
        pending = {tp: self._past_markers(tp, offset) for tp, offset
                   in (self._delivered if offsets is None else offsets).items()}
        if pending:
            self._committer([KafkaTopicPartition(tp.topic, tp.partition, off)
                             for tp, off in pending.items()], self._commit_timeout_s)
            self._committed.update(pending)
            for tp, offset in pending.items():
                if self._delivered.get(tp, offset) < offset:
                    self._delivered[tp] = offset

    def _commit_now(self, offsets: list[KafkaTopicPartition]) -> None:
        """librdkafka's synchronous commit (on ``DeadlineCommitter``'s thread)."""
        self._consumer.commit(offsets=offsets, asynchronous=False)

    def _past_markers(self, tp: TopicPartition, offset: int) -> int:
        """``offset``, or the position past it when it covers everything polled of ``tp``
        (see the class docstring)."""
        if self._delivered.get(tp) != offset:
            return offset
        return max(offset, self._position(tp))

    def assignment(self) -> set[TopicPartition]:
        """The partitions this member reads now."""
        return {TopicPartition(tp.topic, tp.partition) for tp in self._consumer.assignment()}

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Read ``partition`` from ``offset`` on."""
        self._consumer.seek(KafkaTopicPartition(partition.topic, partition.partition, offset))

    def close(self) -> None:
        """Leave the group."""
        self._committer.close()
        self._consumer.close()
