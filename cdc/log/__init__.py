"""The partitioned, append-only event log: the contract and its backends.

The capture appends through a ``Producer``; connectors and tools read through a
``Consumer`` in a consumer group; ``Admin`` lists topics, offsets and lag. ``FileLog``
(``cdc.log.file``) is the embedded default; the Kafka backend implements the same
contract on a Kafka cluster.
"""

from . import records
from .contract import Admin, Consumer, Log, Producer
from .partitioner import murmur2, partition_for
from .records import *  # noqa: F403 (every name of ``records.__all__``)

__all__ = ["Admin", "Consumer", "Log", "Producer", "murmur2", "partition_for",
           *records.__all__]
