"""Consumer groups across processes: fan-out, load balancing, rebalancing, redelivery."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from cdc.log import StartAt
from cdc.log.file import FileConsumer, FileLog

from .conftest import TOPIC, records, spawn


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def read_out(path: Path) -> list[tuple[int, int, int]]:
    """(partition, offset, id) lines a member process wrote."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if not line.startswith(("member", "owns")):
            p, o, k = line.split()
            key = orjson.loads(k)
            rows.append((int(p), int(o), key["id"] if isinstance(key, dict) else int(key)))
    return rows


def owned(path: Path) -> set[int] | None:
    """The partitions a member process last said it owns (None before it said)."""
    if not path.exists():
        return None
    said = [line for line in path.read_text().splitlines() if line.startswith("owns")]
    if not said:
        return None
    # "owns " with nothing after it: the member holds no partition (mid-rebalance)
    return {int(p) for p in said[-1].removeprefix("owns").strip().split(",") if p}


def settled(outs: list[Path], partitions: int = 4) -> bool:
    """True once every member owns some partitions, no two the same, all of them owned."""
    shares = [owned(out) for out in outs]
    if any(not share for share in shares):
        return False
    every = [p for share in shares for p in share or ()]
    return sorted(every) == list(range(partitions))


def stop(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        proc.kill()
        proc.wait()


def create_topic(log_dir: Path, partitions: int = 4) -> FileLog:
    log = FileLog(log_dir)
    log.admin().create_topic(TOPIC, partitions)
    return log


def test_fan_out_every_group_gets_every_event(log_dir: Path, tmp_path: Path) -> None:
    log = create_topic(log_dir)
    outs = [tmp_path / "a.out", tmp_path / "b.out"]
    procs = [spawn("consume", str(log_dir), group, TOPIC, str(out))
             for group, out in zip(("search", "cache"), outs, strict=True)]
    try:
        log.producer().append(records(range(400)))
        wait_for(lambda: all(len(read_out(o)) >= 400 for o in outs))
        for out in outs:
            assert sorted(k for _, _, k in read_out(out)) == list(range(400))
    finally:
        stop(*procs)
        log.close()


def test_load_balancing_splits_partitions(log_dir: Path, tmp_path: Path) -> None:
    log = create_topic(log_dir)
    outs = [tmp_path / "m1.out", tmp_path / "m2.out"]
    procs = [spawn("consume", str(log_dir), "workers", TOPIC, str(o)) for o in outs]
    try:
        wait_for(lambda: settled(outs))  # both members joined and split the partitions
        log.producer().append(records(range(800)))
        wait_for(lambda: sum(len(read_out(o)) for o in outs) >= 800)
        time.sleep(0.5)
        rows = [read_out(o) for o in outs]
        assert sorted(k for r in rows for _, _, k in r) == list(range(800)), "each once"
        partitions = [{p for p, _, _ in r} for r in rows]
        assert partitions[0] and partitions[1], "both members work"
        assert not partitions[0] & partitions[1], "no partition read by both"
    finally:
        stop(*procs)
        log.close()


def test_rebalance_when_a_member_dies_and_redelivery_from_commit(log_dir: Path,
                                                                 tmp_path: Path) -> None:
    log = create_topic(log_dir)
    first, second = tmp_path / "first.out", tmp_path / "second.out"
    a = spawn("consume", str(log_dir), "workers", TOPIC, str(first))
    b = spawn("consume", str(log_dir), "workers", TOPIC, str(second))
    try:
        wait_for(lambda: settled([first, second]))
        log.producer().append(records(range(400)))
        wait_for(lambda: len(read_out(first)) + len(read_out(second)) >= 400)
        os.kill(a.pid, signal.SIGKILL)  # dies holding its partitions
        a.wait()
        log.producer().append(records(range(400, 800)))
        wait_for(lambda: len({k for _, _, k in read_out(second)}
                             | {k for _, _, k in read_out(first)}) >= 800)
        survivor = read_out(second)
        assert {p for p, _, _ in survivor} == {0, 1, 2, 3}, "the survivor took over"
        everything = read_out(first) + survivor
        assert {k for _, _, k in everything} == set(range(800))
        per_partition: dict[int, list[int]] = {}
        for p, o, _ in survivor:
            per_partition.setdefault(p, []).append(o)
        for offsets in per_partition.values():
            assert offsets == sorted(offsets), "order kept within a partition"
    finally:
        stop(a, b)
        log.close()


def test_consumer_sleeps_until_notified(log_dir: Path) -> None:
    log = create_topic(log_dir, 1)
    consumer = log.consumer("idle", topics=[TOPIC], start=StartAt.earliest())
    consumer.poll(10, timeout=0.2)
    cpu_before = time.process_time()
    assert consumer.poll(10, timeout=2.0) == []
    idle_cpu = time.process_time() - cpu_before
    assert idle_cpu < 0.02 * 2.0 + 0.02, f"idle poll used {idle_cpu:.3f} s of CPU"
    writer = subprocess.Popen(["sh", "-c", "sleep 0.5"])  # time passes in another process
    writer.wait()
    proc = spawn("produce", str(log_dir), TOPIC, "0", "1")
    started = time.monotonic()
    batch = consumer.poll(10, timeout=60.0)
    waited = time.monotonic() - started
    proc.wait()
    assert [m.key for m in batch] == [b"0"]
    # woken by the append, long before its timeout (the child's start is in this time,
    # seconds on a busy machine)
    assert waited < 30.0
    consumer.close()
    log.close()


def test_an_unsynced_commit_lost_in_a_machine_crash_delivers_again(
        log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits are visible to the group at once but fsynced at most every
    ``offsets_sync_s``: a machine crash may lose the last ones (the journal keeps what
    was synced), and the group then reads again from the last synced commit."""
    journal = log_dir / "_groups" / "g" / "offsets.log"
    durable: list[int] = []
    real = os.fsync

    def recording(fd: int) -> None:
        real(fd)
        if os.readlink(f"/proc/self/fd/{fd}") == str(journal):
            durable.append(os.fstat(fd).st_size)

    monkeypatch.setattr(os, "fsync", recording)
    log = create_topic(log_dir, partitions=1)
    producer = log.producer()
    producer.append(records(range(30)))
    producer.close()
    first = FileConsumer(log, "g", topics=[TOPIC], start=StartAt.committed(),
                         offsets_sync_s=3600.0)
    seen: list[int] = []
    while len(seen) < 30:
        seen += [m.offset for m in first.poll(10, timeout=5.0)]
        first.commit()
    assert len(durable) == 1  # only the first commit (next offset 10) was synced
    assert log.admin().group_lag("g")[0].committed == 30  # visible to the group anyway
    monkeypatch.setattr(os, "fsync", lambda fd: None)  # the machine dies: no later sync
    first.close()
    journal.write_bytes(journal.read_bytes()[:durable[0]])  # what the disk kept
    restarted = log.consumer("g", topics=[TOPIC], start=StartAt.committed())
    try:
        batch = restarted.poll(100, timeout=5.0)
        assert [m.offset for m in batch][:1] == [10]  # from the synced commit: again
    finally:
        restarted.close()
        log.close()
