"""The partitioned, append-only event log: the contract and its backends.

The capture appends through a ``Producer``; connectors and tools read through a
``Consumer`` in a consumer group; ``Admin`` lists topics, offsets and lag. ``FileLog``
(``cdc.log.file``) is the embedded default; the Kafka backend implements the same
contract on a Kafka cluster.
"""

from .contract import Admin, Consumer, Log, Producer
from .partitioner import murmur2, partition_for
from .records import (
    NO_POSITION,
    Backpressure,
    BackpressurePolicy,
    GroupLag,
    Message,
    PartitionInfo,
    Position,
    Record,
    StartAt,
    StartKind,
    TopicPartition,
)

__all__ = [
    "NO_POSITION",
    "Admin",
    "Backpressure",
    "BackpressurePolicy",
    "Consumer",
    "GroupLag",
    "Log",
    "Message",
    "PartitionInfo",
    "Position",
    "Producer",
    "Record",
    "StartAt",
    "StartKind",
    "TopicPartition",
    "murmur2",
    "partition_for",
]
