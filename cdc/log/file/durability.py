"""How a batch of the file log becomes durable before ``append`` returns.

With ``fsync`` on, a batch is made durable by one fdatasync of the batch journal
(``journal``), not one per partition it touches; checkpoints (``checkpoint``) sync the
segments in the background, and a journal left by a crash is replayed on open. A batch
of a single partition needs no journal: its segment's own fdatasync makes it durable (one
fdatasync too, and its lines written once instead of twice); nor does a batch of a few
partitions with much data each (``syncs_segments``): one fdatasync per segment then
costs less than writing it all twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..records import TopicPartition
from .checkpoint import Checkpointer
from .journal import Journal
from .journal_replay import replay_journal
from .notify import doorbell_name, ring
from .writer import PartitionWriter, sync_file

# a batch of at most this many partitions, with at least this many bytes each on average,
# is made durable by fdatasyncs of its segments instead of the journal (``syncs_segments``)
DIRECT_SYNC_PARTITIONS = 8
DIRECT_SYNC_BYTES = 256 << 10

# one partition's lines of a batch, as the journal holds them: (topic in UTF-8,
# partition, first offset, the lines)
JournalPart = tuple[bytes, int, int, bytes]


def syncs_segments(parts: Sequence[JournalPart]) -> bool:
    """True when a batch of these parts is made durable by each segment's own fdatasync
    rather than the journal's: a few partitions with much data each (a snapshot's
    batches), where copying it all to the journal costs more than a few more syncs."""
    return (len(parts) <= DIRECT_SYNC_PARTITIONS
            and sum(len(part[3]) for part in parts) >= DIRECT_SYNC_BYTES * len(parts))


class Durability:
    """The journal and its checkpoints of one producer (nothing with ``fsync`` off)."""

    def __init__(self, root: Path, fsync: bool,
                 writer: Callable[[TopicPartition], PartitionWriter],
                 known_topic: Callable[[str], bool], *,
                 checkpoint_bytes: int | None = None) -> None:
        """With ``fsync``: replay a journal a crash left (through ``writer``, for topics
        ``known_topic`` says still exist), then journal from here on, checkpointing every
        ``checkpoint_bytes`` (``checkpoint.CHECKPOINT_BYTES`` by default)."""
        self._checkpoints: Checkpointer | None = None
        if fsync:
            for tp in replay_journal(root, writer, known_topic):
                ring(root, doorbell_name(tp.topic, tp.partition))
            self._checkpoints = Checkpointer(root, Journal(root), max_bytes=checkpoint_bytes)

    @property
    def syncs(self) -> bool:
        """Whether appends are made durable at all (``fsync`` on)."""
        return self._checkpoints is not None

    def commit(self, parts: list[JournalPart], written: Sequence[PartitionWriter]) -> None:
        """A batch's lines are in their segments (``parts``, from the ``written``
        writers; none when each segment was synced as it was written): make them
        durable, by the journal or by syncing the segments."""
        checkpoints = self._checkpoints
        if checkpoints is None or not parts:
            return
        if syncs_segments(parts):
            for writer in written:
                sync_file(writer.segment_path)
            return
        checkpoints.journal.write(parts)
        checkpoints.wrote(written)

    def checkpoint(self) -> None:
        """Start a checkpoint when the journal is big or old enough (``checkpoint``)."""
        if self._checkpoints is not None:
            self._checkpoints.maybe_start()

    def finish(self) -> None:
        """Every segment synced and the journal deleted (on close)."""
        if self._checkpoints is not None:
            self._checkpoints.finish()
