"""A batch of one partition is made durable by its segment's own fdatasync: no journal
copy, and a close with nothing journaled syncs nothing more."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cdc.log.file import FileLog, FileLogSettings
from cdc.log.file import checkpoint as checkpoint_module
from cdc.log.file.journal import journal_files

from .conftest import records
from .test_journal import read_all


def _synced_files(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files ``os.fdatasync`` is called on from now on (by their /proc fd link)."""
    real = os.fdatasync
    synced: list[str] = []

    def recording(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fdatasync", recording)
    return synced


def test_a_single_partition_batch_syncs_its_segment_not_the_journal(
        log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1))
    producer = log.producer()
    synced = _synced_files(monkeypatch)
    producer.append(records(range(100)))
    producer.append(records(range(100, 200)))
    assert len(synced) == 2, "one fdatasync per batch"
    assert all(path.endswith(".jsonl") for path in synced), synced
    (journal,) = journal_files(log_dir)
    assert journal.stat().st_size == 0, "the batches were not copied to the journal"

    def no_syncfs(root: Path, segments: object) -> None:
        raise AssertionError("nothing was journaled: the close has nothing to sync")

    monkeypatch.setattr(checkpoint_module, "sync_segments", no_syncfs)
    log.close()
    monkeypatch.undo()
    assert journal_files(log_dir) == []
    assert len(read_all(FileLog(log_dir))) == 200, "every batch in its segment"


def test_batches_of_several_partitions_are_still_journaled(
        log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=3))
    producer = log.producer()
    synced = _synced_files(monkeypatch)
    producer.append(records(range(100)))  # keys spread over the three partitions
    assert [Path(p).suffix for p in synced] == [".journal"]
    monkeypatch.undo()
    assert journal_files(log_dir)[0].stat().st_size > 0
    log.close()
    assert journal_files(log_dir) == []


def test_a_single_partition_batch_survives_a_crash_without_the_journal(
        log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1))
    producer = log.producer()
    producer.append(records(range(50)))
    producer.append(records(range(50, 60)))
    # the process dies here (no close): the segment alone holds both batches
    reopened = FileLog(log_dir, FileLogSettings(default_partitions=1))
    seen = read_all(reopened)
    assert sorted(key for _, _, key in seen) == sorted(r.key for r in records(range(60)))
    reopened.close()
    log.close()


def test_a_big_batch_of_few_partitions_syncs_its_segments(
        log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=3))
    producer = log.producer()
    synced = _synced_files(monkeypatch)
    padding = b"x" * 600
    big = [r._replace(value=b'{"pad":"%s","id":%d}' % (padding, i))
           for i, r in enumerate(records(range(3_000)))]  # ~2 MB over three partitions
    producer.append(big)
    assert sorted(Path(p).suffix for p in synced) == [".jsonl"] * 3, synced
    monkeypatch.undo()
    assert journal_files(log_dir)[0].stat().st_size == 0, "nothing copied to the journal"
    log.close()
    assert len(read_all(FileLog(log_dir))) == 3_000

