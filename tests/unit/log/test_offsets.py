"""A group's committed offsets: one journal, one fsync per commit, compacted as it grows."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cdc.log import TopicPartition
from cdc.log.file import offsets as offsets_module
from cdc.log.file.offsets import OffsetStore

TPS = [TopicPartition(f"app.public.t{t}", p) for t in range(500) for p in range(3)]


def test_a_commit_of_many_partitions_costs_one_fsync(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    store = OffsetStore(tmp_path, "g")
    synced: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    store.put_many({tp: i for i, tp in enumerate(TPS)})
    assert len(synced) == 1
    other = OffsetStore(tmp_path, "g")  # another member, another process's view
    assert other.get(TPS[7]) == 7
    assert len(other.all()) == len(TPS)


def test_the_newest_commit_wins_and_a_reader_sees_later_commits(tmp_path: Path) -> None:
    writer, reader = OffsetStore(tmp_path, "g"), OffsetStore(tmp_path, "g")
    tp = TopicPartition("app.public.Orders", 2)
    writer.put(tp, 5)
    assert reader.get(tp) == 5
    writer.put(tp, 9)
    assert reader.get(tp) == 9
    assert reader.get(TopicPartition("app.public.orders", 2)) is None


def test_a_torn_line_is_skipped(tmp_path: Path) -> None:
    store = OffsetStore(tmp_path, "g")
    store.put(TPS[0], 3)
    with store.path.open("ab") as journal:
        journal.write(b"1 12")  # a crash in the middle of a commit
    store.put(TPS[1], 4)
    fresh = OffsetStore(tmp_path, "g")
    assert fresh.all() == {TPS[0]: 3, TPS[1]: 4}


def test_the_journal_is_rewritten_when_it_grows(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offsets_module, "COMPACT_MIN_BYTES", 4096)
    store, reader = OffsetStore(tmp_path, "g"), OffsetStore(tmp_path, "g")
    assert reader.all() == {}
    for offset in range(400):
        store.put_many({TPS[0]: offset, TPS[1]: offset * 2})
    assert store.path.stat().st_size < 4096 + 200
    assert reader.all() == {TPS[0]: 399, TPS[1]: 798}  # reads on across the rewrite


def test_offsets_of_older_logs_are_read(tmp_path: Path) -> None:
    legacy = tmp_path / "_groups" / "g" / "offsets"
    legacy.mkdir(parents=True)
    (legacy / "app.public.t0~1").write_text("42\n")
    store = OffsetStore(tmp_path, "g")
    assert store.get(TopicPartition("app.public.t0", 1)) == 42
    store.put(TopicPartition("app.public.t0", 1), 50)
    assert OffsetStore(tmp_path, "g").get(TopicPartition("app.public.t0", 1)) == 50
