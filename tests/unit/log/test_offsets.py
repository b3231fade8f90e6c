"""A group's committed offsets: one journal, one fsync per commit, compacted as it grows."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cdc.log import TopicPartition
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


def test_the_journal_is_rewritten_when_it_grows(tmp_path: Path) -> None:
    store = OffsetStore(tmp_path, "g", compact_min_bytes=4096)
    reader = OffsetStore(tmp_path, "g")
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


def test_a_member_store_syncs_at_most_every_interval_and_on_close(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    store, reader = OffsetStore(tmp_path, "g", sync_every=3600), OffsetStore(tmp_path, "g")
    for offset in range(1, 6):
        store.put(TPS[0], offset)
        assert reader.get(TPS[0]) == offset  # visible to every reader at once
    assert len(synced) == 1  # the first commit; the others wait for the interval
    store.sync_if_due()
    assert len(synced) == 1
    store.close()
    assert len(synced) == 2
    monkeypatch.setattr(time, "monotonic", lambda: 1e12)  # much later
    late = OffsetStore(tmp_path, "g", sync_every=3600)
    late.put(TPS[0], 7)
    late.put(TPS[0], 8)
    assert len(synced) == 3
    late.sync_if_due()  # nothing waits
    assert len(synced) == 3


def test_a_machine_crash_before_the_sync_delivers_again_and_never_skips(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a power loss may leave of the journal: what was fsynced, then possibly a part
    of what was not. The group starts again from the last synced commit or a later
    complete one, never past the last commit."""
    durable: list[int] = []
    real = os.fsync

    def recording(fd: int) -> None:
        real(fd)
        durable.append(os.fstat(fd).st_size)

    monkeypatch.setattr(os, "fsync", recording)
    store = OffsetStore(tmp_path, "g", sync_every=3600)
    for offset in (100, 200, 300, 400):
        store.put_many({TPS[0]: offset, TPS[1]: offset + 1})
    assert durable, "the first commit is synced"
    written = store.path.read_bytes()
    for cut in range(durable[-1], len(written) + 1):
        store.path.write_bytes(written[:cut])
        found = OffsetStore(tmp_path, "g").all()
        assert found.get(TPS[0]) in (100, 200, 300, 400), cut
        assert found.get(TPS[1]) in (101, 201, 301, 401), cut
    store.path.write_bytes(written[:durable[-1]])
    assert OffsetStore(tmp_path, "g").all() == {TPS[0]: 100, TPS[1]: 101}
