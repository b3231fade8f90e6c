"""The Kafka backend's admin: topics, watermarks, group offsets."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from cdc.errors import LogError

from ..records import GroupLag, PartitionInfo

TIMEOUT_S = 30.0


class KafkaAdmin:
    """Topics, partitions, offsets and lag on a Kafka cluster."""

    def __init__(self, config: dict[str, Any], default_partitions: int) -> None:
        self._config = config
        self._client = AdminClient(config)
        self._default_partitions = default_partitions
        self._counts: dict[str, int] = {}

    def create_topic(self, topic: str, partitions: int | None = None) -> None:
        """Create ``topic`` unless it exists."""
        count = partitions or self._default_partitions
        futures = self._client.create_topics([NewTopic(topic, count, -1)])
        try:
            futures[topic].result(TIMEOUT_S)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise LogError(f"cannot create topic {topic!r}: {exc}") from exc

    def partition_count(self, topic: str, *, create: bool = False) -> int:
        """Partitions of ``topic`` (cached); created with the default count if asked."""
        count = self._counts.get(topic)
        if count is not None:
            return count
        metadata = self._client.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            if not create:
                return 0
            self.create_topic(topic)
            metadata = self._client.list_topics(topic, timeout=TIMEOUT_S).topics[topic]
        count = self._counts[topic] = len(metadata.partitions)
        return count

    def topics(self) -> list[str]:
        """Every topic but Kafka's internal ones, sorted."""
        names = self._client.list_topics(timeout=TIMEOUT_S).topics
        return sorted(t for t in names if not t.startswith("__"))

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        reader = Consumer({**self._config, "group.id": "distributary-admin"})
        try:
            low, high = reader.get_watermark_offsets(KafkaTopicPartition(topic, partition),
                                                     timeout=TIMEOUT_S)
        finally:
            reader.close()
        return int(low), int(high)

    def partitions(self, topic: str) -> list[PartitionInfo]:
        """Watermarks of each partition (size is not known to clients: reported as 0)."""
        return [PartitionInfo(topic, p, *self._watermarks(topic, p), 0)
                for p in range(self.partition_count(topic))]

    def end_offset(self, topic: str, partition: int) -> int:
        """The high watermark of one partition."""
        return self._watermarks(topic, partition)[1]

    def groups(self) -> list[str]:
        """Consumer groups known to the cluster."""
        result = self._client.list_consumer_groups().result(TIMEOUT_S)
        return sorted(g.group_id for g in result.valid
                      if not g.group_id.startswith("distributary-"))

    def group_lag(self, group: str) -> list[GroupLag]:
        """Committed offsets of ``group`` and the lag behind each high watermark."""
        futures = self._client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
        listed = futures[group].result(TIMEOUT_S)
        lags = []
        for tp in listed.topic_partitions:
            if tp.offset < 0:
                continue
            lags.append(GroupLag(group, tp.topic, tp.partition, tp.offset,
                                 self.end_offset(tp.topic, tp.partition)))
        return sorted(lags, key=lambda g: (g.topic, g.partition))
