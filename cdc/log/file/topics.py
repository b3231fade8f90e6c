"""Topic metadata and partition layout on disk, and cheap reads of partition ends."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cdc.errors import LogError

from ..records import Message
from .codec import RecordFormatError, decode_record
from .names import topic_dir, topic_of_dir
from .notify import TOPICS_BELL, ring
from .segments import SEGMENT_SUFFIX, list_segments, segment_name

_TOPIC_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,248}$")
TAIL_BYTES = 1 << 16


@dataclass(frozen=True, slots=True)
class TopicMeta:
    """What is fixed when a topic is created."""

    partitions: int
    compacted: bool = False


def check_topic_name(topic: str) -> None:
    """Raise LogError unless ``topic`` is a valid topic name."""
    if not _TOPIC_NAME.match(topic) or topic in {".", ".."}:
        raise LogError(f"invalid topic name {topic!r}: use letters, digits, '.', '_' and '-'")


def partition_dir(root: Path, topic: str, partition: int) -> Path:
    """Directory of one partition (``partition=<p>``, so Spark sees a partition column)."""
    return topic_dir(root, topic) / f"partition={partition}"


def read_meta(root: Path, topic: str) -> TopicMeta | None:
    """A topic's metadata, or None when the topic does not exist."""
    try:
        data = json.loads((topic_dir(root, topic) / "topic.json").read_text())
    except FileNotFoundError:
        return None
    return TopicMeta(int(data["partitions"]), bool(data.get("compacted", False)))


def write_meta(root: Path, topic: str, meta: TopicMeta) -> None:
    """Create a topic's directories and metadata (atomically), and tell consumers."""
    check_topic_name(topic)
    directory = topic_dir(root, topic)
    stored = topic_of_dir(root, directory.name) if (directory / "topic.json").exists() else None
    if stored is not None and stored != topic:
        raise LogError(f"topic {topic!r}: its directory {directory.name!r} already holds "
                       f"topic {stored!r}; rename one of the two tables' topics")
    for p in range(meta.partitions):
        partition_dir(root, topic, p).mkdir(parents=True, exist_ok=True)
    path = directory / "topic.json"
    tmp = path.with_name(f".topic.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"partitions": meta.partitions, "compacted": meta.compacted,
                               "topic": topic}))
    os.replace(tmp, path)
    ring(root, TOPICS_BELL)


def list_topics(root: Path) -> list[str]:
    """Every topic under ``root``, sorted."""
    if not root.exists():
        return []
    found = []
    with os.scandir(root) as entries:
        names = [e.name for e in entries if not e.name.startswith(("_", "."))]
    for name in names:
        if os.path.exists(os.path.join(root, name, "topic.json")):
            topic = topic_of_dir(root, name)
            if topic is not None:
                found.append(topic)
    return sorted(found)


def last_record(root: Path, topic: str, partition: int) -> Message | None:
    """The last complete record of a partition, read from the tail of its files."""
    directory = partition_dir(root, topic, partition)
    for base in reversed(list_segments(directory)):
        path = directory / segment_name(base)
        try:
            with path.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                span = TAIL_BYTES
                while True:
                    f.seek(max(0, size - span))
                    tail = f.read(span)
                    whole = span >= size
                    end = tail.rfind(b"\n")
                    if end < 0 and whole:
                        break  # no complete record in this segment
                    prev = tail.rfind(b"\n", 0, end) if end >= 0 else -1
                    if end < 0 or (prev < 0 and not whole):
                        span *= 4
                        continue
                    return decode_record(tail[prev + 1:end], topic, partition)
        except (FileNotFoundError, RecordFormatError):
            continue
    return None


def start_offset(root: Path, topic: str, partition: int) -> int:
    """The first offset still retained."""
    bases = list_segments(partition_dir(root, topic, partition))
    return bases[0] if bases else 0


def end_offset(root: Path, topic: str, partition: int) -> int:
    """The offset the next record will get (after the last complete one)."""
    last = last_record(root, topic, partition)
    if last is not None:
        return last.offset + 1
    bases = list_segments(partition_dir(root, topic, partition))
    return bases[-1] if bases else 0


def partition_size(root: Path, topic: str, partition: int) -> int:
    """Bytes of segment files in a partition."""
    directory = partition_dir(root, topic, partition)
    total = 0
    for base in list_segments(directory):
        try:
            total += (directory / segment_name(base)).stat().st_size
        except FileNotFoundError:
            continue
    return total


__all__ = ["SEGMENT_SUFFIX", "TopicMeta", "check_topic_name", "end_offset", "last_record",
           "list_topics", "partition_dir", "partition_size", "read_meta", "start_offset",
           "write_meta"]
