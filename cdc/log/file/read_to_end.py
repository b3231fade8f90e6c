"""Reading a file-log topic to its end offsets, without a consumer group."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..records import Message
from .reader import PartitionReader
from .topics import end_offset, partition_dir, read_meta, start_offset


def read_to_end(root: Path, topic: str) -> Iterator[Message]:
    """Every message of ``topic`` up to each partition's end offset at the call, partition
    by partition, in offset order; nothing if the topic does not exist."""
    meta = read_meta(root, topic)
    if meta is None:
        return
    ends = {p: end_offset(root, topic, p) for p in range(meta.partitions)}
    for partition, end in ends.items():
        reader = PartitionReader(partition_dir(root, topic, partition), topic, partition)
        try:
            reader.seek(start_offset(root, topic, partition))
            while reader.next_offset < end:
                batch = reader.read(min(10_000, end - reader.next_offset))
                if not batch:
                    break
                yield from (m for m in batch if m.offset < end)
        finally:
            reader.close()
