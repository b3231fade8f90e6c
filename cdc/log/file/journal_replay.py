"""Replaying a journal left behind: restore batches a machine crash took from the segments.

A batch's part is already on disk when the partition ends at or past the part's last
offset (the usual case: the process died, the page cache survived). A partition that ends
inside the part gets the rest appended. One that ends before the part's first offset
lost records no journal holds: that is corruption, reported with the journal's file and
byte position. Parts of topics deleted since are skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from cdc.errors import LogError

from ..records import Record, TopicPartition
from .codec import decode_record
from .journal import JournalPart, discard, journal_files, read_batches
from .writer import PartitionWriter, sync_file

log = logging.getLogger(__name__)


def replay_journal(root: Path, writer_for: Callable[[TopicPartition], PartitionWriter],
                   topic_exists: Callable[[str], bool]) -> list[TopicPartition]:
    """Replay every journal file under ``root``, sync what was restored, delete the files;
    returns the partitions that got records back."""
    files = journal_files(root)
    if not files:
        return []
    restored: dict[TopicPartition, PartitionWriter] = {}
    for batch in read_batches(root):
        for part in batch.parts:
            if not topic_exists(part.topic):
                continue
            tp = TopicPartition(part.topic, part.partition)
            writer = writer_for(tp)
            if _restore(writer, part, batch.path, batch.position):
                restored[tp] = writer
    for writer in restored.values():
        sync_file(writer.segment_path)
    if restored:
        log.warning("restored records a crash took from %d partitions, from the journal",
                    len(restored), extra={"partitions": len(restored)})
    discard(files)
    return list(restored)


def _restore(writer: PartitionWriter, part: JournalPart, path: Path, position: int) -> bool:
    lines = part.data.splitlines()
    end = part.first_offset + len(lines)
    if end <= writer.next_offset:
        return False
    if part.first_offset > writer.next_offset:
        raise LogError(
            f"the journal ({path} byte {position}) holds offsets {part.first_offset}.."
            f"{end - 1} of {part.topic}[{part.partition}], but the partition ends at offset "
            f"{writer.next_offset}: records {writer.next_offset}..{part.first_offset - 1} "
            "were lost; check it with `cdc log verify`")
    missing = lines[writer.next_offset - part.first_offset:]
    records = []
    for line in missing:
        message = decode_record(line, part.topic, part.partition)
        records.append(Record(part.topic, message.key, message.value, message.position,
                              message.tombstone, message.timestamp_ms, part.partition))
    writer.append(records, 0, sync=False)
    return True
