"""Reading a whole topic without joining a group (``cdc log dump`` and ``tail``)."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from pathlib import Path

from ..records import Message
from .notify import AppendWatcher, doorbells_dir
from .reader import PartitionReader
from .topics import end_offset, partition_dir, read_meta, start_offset


class TopicReader:
    """Cursors on every (or one) partition of a topic, outside any consumer group."""

    def __init__(self, root: Path, topic: str, *, partitions: list[int] | None = None) -> None:
        meta = read_meta(root, topic)
        if meta is None:
            raise KeyError(topic)
        self.root, self.topic = root, topic
        chosen = partitions if partitions is not None else list(range(meta.partitions))
        self.readers = {p: PartitionReader(partition_dir(root, topic, p), topic, p)
                        for p in chosen}

    def seek(self, where: str | int) -> None:
        """Start at ``earliest``, ``latest`` or an offset (in every chosen partition)."""
        for p, reader in self.readers.items():
            if where == "earliest":
                reader.seek(start_offset(self.root, self.topic, p))
            elif where == "latest":
                reader.seek(end_offset(self.root, self.topic, p))
            else:
                reader.seek(int(where))

    def read_available(self, until: int | None = None) -> Iterator[Message]:
        """Everything there now, merged across partitions in source-position order."""
        streams = [self._drain(reader, until) for reader in self.readers.values()]
        yield from heapq.merge(*streams, key=lambda m: (m.position, m.partition, m.offset))

    @staticmethod
    def _drain(reader: PartitionReader, until: int | None) -> Iterator[Message]:
        while batch := reader.read(10_000):
            for message in batch:
                if until is not None and message.offset >= until:
                    return
                yield message

    def follow(self) -> Iterator[Message]:
        """Everything there now, then new records as they arrive (until interrupted)."""
        watcher = AppendWatcher()
        watcher.watch(doorbells_dir(self.root))
        try:
            while True:
                watcher.drain()
                yield from self.read_available()
                watcher.wait(1.0)
        finally:
            watcher.close()

    def close(self) -> None:
        """Release the files."""
        for reader in self.readers.values():
            reader.close()
