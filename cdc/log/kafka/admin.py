"""The Kafka backend's admin: topics (created in batches), watermarks, group offsets."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.admin._resource import ResourceType
from confluent_kafka.cimpl import NewTopic

from cdc.errors import LogError

from ..history import keeps_history
from ..limits import DEFAULT_MAX_RECORD_BYTES
from ..records import GroupLag, PartitionInfo
from .retry import retrying
from .settings import HISTORY_CONFIG, message_bytes, topic_config

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0
_EARLIEST: Any = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
_LATEST: Any = OffsetSpec.latest()  # type: ignore[no-untyped-call]
TOPICS_PER_CALL = 250
"""Topics created (or checked) by one admin request."""


def _batches(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), TOPICS_PER_CALL):
        yield items[start:start + TOPICS_PER_CALL]


@dataclass(frozen=True, slots=True)
class Replication:
    """``log.replication_factor`` and ``log.min_insync_replicas`` (None: from the
    cluster's size, see ``resolve``)."""

    factor: int | None = None
    min_insync: int | None = None

    def resolve(self, brokers: int) -> tuple[int, int]:
        """The factor and in-sync minimum for a cluster of ``brokers``: 3 and 2 on 3 or
        more, else every broker and 1 (a write then needs only the leader)."""
        factor = self.factor or max(1, min(3, brokers))
        return factor, self.min_insync or (2 if factor >= 3 else 1)


class KafkaAdmin:
    """Topics, partitions, offsets and lag on a Kafka cluster."""

    def __init__(self, config: dict[str, Any], default_partitions: int,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
                 replication: Replication | None = None) -> None:
        self._config = config
        self._client = AdminClient(config)
        self._default_partitions = default_partitions
        self.max_record_bytes = max_record_bytes
        self._counts: dict[str, int] = {}
        self._replication = replication or Replication()
        self._resolved: tuple[int, int] | None = None

    def replication(self) -> tuple[int, int]:
        """The replication factor and min.insync.replicas of topics this log creates."""
        if self._resolved is None:
            try:
                brokers = len(self._client.list_topics(timeout=TIMEOUT_S).brokers)
            except KafkaException as exc:
                raise LogError(f"cannot read the Kafka cluster's brokers: {exc}") from exc
            self._resolved = self._replication.resolve(brokers)
        return self._resolved

    def _new_topic(self, topic: str, partitions: int, config: dict[str, str]) -> NewTopic:
        factor, in_sync = self.replication()
        return NewTopic(topic, partitions, factor,
                        config={**config, "min.insync.replicas": str(in_sync)})

    def create_topic(self, topic: str, partitions: int | None = None) -> None:
        """Create ``topic`` unless it exists."""
        self.create_topics([topic], partitions)

    def create_topics(self, topics: Sequence[str], partitions: int | None = None) -> None:
        """Create every topic of ``topics`` that does not exist, one request per batch, with
        a ``max.message.bytes`` that fits ``log.max_record_bytes``; existing topics whose
        limit is lower are raised to it."""
        wanted = sorted(set(topics) - self._counts.keys())
        if not wanted:
            return
        existing = self._existing_counts(wanted)
        count = partitions or self._default_partitions
        missing = [t for t in wanted if t not in existing]
        for batch in _batches(missing):
            futures = self._client.create_topics(
                [self._new_topic(t, count, topic_config(self.max_record_bytes,
                                                        history=keeps_history(t)))
                 for t in batch], request_timeout=TIMEOUT_S)
            for topic, future in futures.items():
                try:
                    future.result(TIMEOUT_S)
                except KafkaException as exc:
                    if "TOPIC_ALREADY_EXISTS" not in str(exc):
                        raise LogError(f"cannot create topic {topic!r}: {exc}") from exc
                    existing[topic] = self._existing_counts([topic]).get(topic, count)
                    continue
                self._counts[topic] = count
            self._await_leaders(batch)
        self.raise_limits(sorted(existing))
        self.keep_history(sorted(t for t in existing if keeps_history(t)))
        self._counts.update(existing)

    def _await_leaders(self, topics: Sequence[str]) -> None:
        """Wait until every partition of ``topics`` has a leader (a new topic's first
        moments answer NOT_LEADER_FOR_PARTITION)."""
        deadline = time.monotonic() + TIMEOUT_S
        waiting = list(topics)
        while waiting and time.monotonic() < deadline:
            metadata = self._client.list_topics(timeout=TIMEOUT_S)
            waiting = [t for t in waiting if (meta := metadata.topics.get(t)) is None
                       or meta.error is not None or not meta.partitions
                       or any(p.leader < 0 for p in meta.partitions.values())]
            if waiting:
                time.sleep(0.1)

    def _existing_counts(self, topics: Sequence[str]) -> dict[str, int]:
        """Partition counts of those of ``topics`` that exist (one metadata request)."""
        try:
            metadata = (self._client.list_topics(topics[0], timeout=TIMEOUT_S)
                        if len(topics) == 1 else self._client.list_topics(timeout=TIMEOUT_S))
        except KafkaException as exc:
            raise LogError(f"cannot list Kafka topics: {exc}") from exc
        found = {}
        for topic in topics:
            meta = metadata.topics.get(topic)
            if meta is not None and meta.error is None and meta.partitions:
                found[topic] = len(meta.partitions)
        return found

    def replica_counts(self, topics: Sequence[str]) -> dict[str, int]:
        """The fewest replicas any partition of each of ``topics`` has."""
        try:
            metadata = self._client.list_topics(timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise LogError(f"cannot list Kafka topics: {exc}") from exc
        return {topic: min(len(p.replicas) for p in meta.partitions.values())
                for topic in topics if (meta := metadata.topics.get(topic)) is not None
                and meta.partitions}

    def topic_limits(self, topics: Sequence[str]) -> dict[str, int]:
        """``max.message.bytes`` of each of ``topics`` (one describe request per batch)."""
        limits: dict[str, int] = {}
        for batch in _batches(topics):
            futures = self._client.describe_configs(
                [ConfigResource(ResourceType.TOPIC, t) for t in batch],
                request_timeout=TIMEOUT_S)
            for resource, future in futures.items():
                entry = future.result(TIMEOUT_S).get("max.message.bytes")
                if entry is not None and entry.value is not None:
                    limits[resource.name] = int(entry.value)
        return limits

    def raise_limits(self, topics: Sequence[str]) -> None:
        """Raise ``max.message.bytes`` of topics that are below what the setting needs."""
        needed = message_bytes(self.max_record_bytes)
        low = [t for t, limit in self.topic_limits(topics).items() if limit < needed]
        for topic, error in self._set_configs(low, {"max.message.bytes": str(needed)}):
            if error is None:
                log.info("raised max.message.bytes of topic %s to %d (log.max_record_"
                         "bytes)", topic, needed, extra={"topic": topic})
            else:
                log.warning("cannot raise max.message.bytes of topic %s to %d: %s",
                            topic, needed, error, extra={"topic": topic})

    def keep_history(self, topics: Sequence[str]) -> None:
        """Set history topics created elsewhere (or by an older version) to keep their
        records forever; a refusal is logged (the records may expire: fix it by hand)."""
        for topic, error in self._set_configs(topics, HISTORY_CONFIG):
            if error is not None:
                log.warning("cannot make topic %s keep its records forever (set "
                            "retention.ms=-1 and retention.bytes=-1 on it): %s",
                            topic, error, extra={"topic": topic})

    def _set_configs(self, topics: Sequence[str], configs: dict[str, str]
                     ) -> Iterator[tuple[str, KafkaException | None]]:
        """Set ``configs`` on each of ``topics`` (one request per batch); yields each
        topic with the error refusing it, or None."""
        entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
                   for name, value in configs.items()]
        for batch in _batches(topics):
            futures = self._client.incremental_alter_configs(
                [ConfigResource(ResourceType.TOPIC, t, incremental_configs=entries)
                 for t in batch], request_timeout=TIMEOUT_S)
            for resource, future in futures.items():
                try:
                    future.result(TIMEOUT_S)
                except KafkaException as exc:
                    yield resource.name, exc
                else:
                    yield resource.name, None

    def broker_limit(self) -> int | None:
        """The broker's ``message.max.bytes`` (the default of topics created elsewhere)."""
        brokers = self._client.list_topics(timeout=TIMEOUT_S).brokers
        if not brokers:
            return None
        resource = ConfigResource(ResourceType.BROKER, str(min(brokers)))
        entries = self._client.describe_configs([resource],
                                                request_timeout=TIMEOUT_S)[resource]
        entry = entries.result(TIMEOUT_S).get("message.max.bytes")
        return int(entry.value) if entry is not None and entry.value is not None else None

    def partition_count(self, topic: str, *, create: bool = False) -> int:
        """Partitions of ``topic`` (cached); created with the default count if asked."""
        count = self._counts.get(topic)
        if count is not None:
            return count
        if create:
            self.create_topics([topic])
            return self._counts[topic]
        return self._existing_counts([topic]).get(topic, 0)  # not cached: limits unchecked

    def topics(self) -> list[str]:
        """Every topic but Kafka's internal ones, sorted."""
        names = self._client.list_topics(timeout=TIMEOUT_S).topics
        return sorted(t for t in names if not t.startswith("__"))

    def _list_offsets(self, partitions: Iterable[tuple[str, int]],
                      spec: Any) -> dict[tuple[str, int], int]:
        """The earliest or latest offset of every partition, in one admin request."""
        wanted = {KafkaTopicPartition(topic, p): spec for topic, p in sorted(set(partitions))}
        if not wanted:
            return {}

        def request() -> dict[tuple[str, int], int]:
            futures = self._client.list_offsets(wanted, request_timeout=TIMEOUT_S)
            return {(tp.topic, tp.partition): int(future.result(TIMEOUT_S).offset)
                    for tp, future in futures.items()}
        try:
            return retrying(request)
        except KafkaException as exc:
            raise LogError(f"cannot list the offsets of {len(wanted)} partitions: "
                           f"{exc}") from exc

    def end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The high watermark of each of ``partitions`` (topic, partition), in one request."""
        return self._list_offsets(partitions, _LATEST)

    def partitions(self, topic: str) -> list[PartitionInfo]:
        """Watermarks of each partition (size is not known to clients: reported as 0)."""
        keys = [(topic, p) for p in range(self.partition_count(topic))]
        lows = self._list_offsets(keys, _EARLIEST)
        highs = self.end_offsets(keys)
        return [PartitionInfo(topic, p, lows[topic, p], highs[topic, p], 0) for _, p in keys]

    def topic_id(self, topic: str) -> str:
        """The topic's id: a topic deleted and created again under its name has a new
        one (and offsets from 0 again)."""
        futures = self._client.describe_topics(TopicCollection([topic]),
                                               request_timeout=TIMEOUT_S)
        try:
            return str(futures[topic].result(TIMEOUT_S).topic_id)
        except KafkaException as exc:
            raise LogError(f"cannot describe topic {topic}: {exc}") from exc

    def topic_setting(self, topic: str, name: str) -> str | None:
        """The value of one of the topic's settings (its own, else the broker's default)."""
        resource = ConfigResource(ResourceType.TOPIC, topic)
        try:
            entries = self._client.describe_configs(
                [resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)
        except KafkaException as exc:
            raise LogError(f"cannot read the settings of topic {topic}: {exc}") from exc
        entry = entries.get(name)
        return None if entry is None or entry.value is None else str(entry.value)

    def end_offset(self, topic: str, partition: int) -> int:
        """The high watermark of one partition."""
        return self.end_offsets([(topic, partition)])[topic, partition]

    def groups(self) -> list[str]:
        """Consumer groups known to the cluster."""
        result = self._client.list_consumer_groups().result(TIMEOUT_S)
        return sorted(g.group_id for g in result.valid
                      if not g.group_id.startswith("distributary-"))

    def group_lag(self, group: str) -> list[GroupLag]:
        """Committed offsets of ``group`` and the lag behind each high watermark."""
        listed = retrying(lambda: self._client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)])[group].result(TIMEOUT_S))
        committed = {(tp.topic, tp.partition): int(tp.offset)
                     for tp in listed.topic_partitions if tp.offset >= 0}
        if not committed:
            return []
        existing = self._existing_counts(sorted({topic for topic, _ in committed}))
        committed = {(topic, p): offset for (topic, p), offset in committed.items()
                     if p < existing.get(topic, 0)}  # offsets of deleted topics linger
        ends = self.end_offsets(committed)
        return [GroupLag(group, topic, partition, offset, ends[topic, partition])
                for (topic, partition), offset in sorted(committed.items())]

    def create_compacted_topic(self, topic: str) -> None:
        """Create ``topic`` with one partition and ``cleanup.policy=compact`` (the latest
        record per key is kept) unless it exists."""
        if topic in self._counts:
            return
        existing = self._existing_counts([topic])
        if topic not in existing:
            future = self._client.create_topics(
                [self._new_topic(topic, 1, {"cleanup.policy": "compact"})],
                request_timeout=TIMEOUT_S)[topic]
            try:
                future.result(TIMEOUT_S)
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise LogError(f"cannot create topic {topic!r}: {exc}") from exc
            self._await_leaders([topic])
            existing = self._existing_counts([topic]) or {topic: 1}
        self._counts[topic] = existing[topic]
