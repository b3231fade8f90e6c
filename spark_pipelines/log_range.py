"""A range of offsets of a topic, read outside any consumer group.

A rebuild notes the end offset of every partition before it reads the state; its
catch-up then reads each partition from exactly that offset up to the end offset it has
now, by assigning the partition at the offset (the topic cursors ``cdc log dump`` uses:
``cdc.log.file.tail.TopicReader`` and ``KafkaLog.topic_reader``). Nothing before the
noted offsets is read again, and no group is joined, so there is no rebalance to wait
for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from cdc.log import Message

from .source import LogSource


class _Cursor(Protocol):
    def seek(self, where: str | int) -> None: ...

    def read_available(self, until: int | None = None) -> Iterator[Message]: ...

    def close(self) -> None: ...


def read_range(source: LogSource, topic: str, starts: Mapping[int, int],
               ends: Mapping[int, int]) -> Iterator[Message]:
    """The messages of ``topic`` at offsets ``starts[p]`` (0 if not given) up to
    ``ends[p]`` (excluded) of each partition ``p`` of ``ends``, partition by partition,
    in offset order."""
    for partition, end in sorted(ends.items()):
        start = starts.get(partition, 0)
        if start >= end:
            continue
        cursor = _cursor(source, topic, partition)
        try:
            cursor.seek(start)
            for message in cursor.read_available(until=end):
                if message.offset >= start:
                    yield message
        finally:
            cursor.close()


def _cursor(source: LogSource, topic: str, partition: int) -> _Cursor:
    if source.backend == "file":
        from cdc.log.file.tail import TopicReader

        assert source.path is not None
        return TopicReader(source.path, topic, partitions=[partition])
    from cdc.log.kafka import KafkaLog

    log = source.open_log()
    assert isinstance(log, KafkaLog)
    try:
        return log.topic_reader(topic, partitions=[partition])
    finally:
        log.close()
