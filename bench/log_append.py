"""Log append/read throughput against a raw write and a raw read of the same bytes
(``make bench-log``).

Batches of 1,000 events of ~120 bytes, a durable flush (fdatasync) per batch, in process;
five rounds interleaved, the median of each figure printed.
The read reference reads the log's own segment files with a plain buffered
``for line in file`` loop. Prints ``name=value`` lines; the last one is the headline ratio.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import orjson

from cdc.log import Position, Record, StartAt
from cdc.log.file import FileLog, FileLogSettings
from cdc.memory import keep_freed_memory

BATCH = 1_000
BATCHES = 200
ROUNDS = 5
TOPIC = "bench.public.orders"


def _events() -> list[list[Record]]:
    batches = []
    seq = 0
    for b in range(BATCHES):
        batch = []
        for i in range(BATCH):
            row_id = b * BATCH + i
            key = orjson.dumps({"id": row_id})
            value = orjson.dumps({"op": "c", "key": {"id": row_id},
                                  "after": {"id": row_id, "status": "new", "amount": "12.50"},
                                  "source": {"lsn": seq}})
            batch.append(Record(TOPIC, key, value, Position(1000 + b, i)))
            seq += 1
        batches.append(batch)
    return batches


def bench_raw(directory: Path, payloads: list[bytes]) -> float:
    """Write pre-serialized bytes with one fdatasync per batch: the reference."""
    fd = os.open(directory / "raw.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    started = time.perf_counter()
    for payload in payloads:
        os.write(fd, payload)
        os.fdatasync(fd)
    elapsed = time.perf_counter() - started
    os.close(fd)
    return BATCH * len(payloads) / elapsed


def bench_append(directory: Path, batches: list[list[Record]]) -> float:
    """Append through the file log's producer, durable per batch."""
    log = FileLog(directory, FileLogSettings(default_partitions=1))
    producer = log.producer()
    started = time.perf_counter()
    for batch in batches:
        producer.append(batch)
    elapsed = time.perf_counter() - started
    log.close()
    return BATCH * len(batches) / elapsed


def bench_read(directory: Path, total: int) -> float:
    """Read everything back through a consumer."""
    log = FileLog(directory)
    consumer = log.consumer("bench", topics=[TOPIC], start=StartAt.earliest())
    started = time.perf_counter()
    seen = 0
    while seen < total:
        seen += len(consumer.poll(10_000, timeout=1.0))
    elapsed = time.perf_counter() - started
    consumer.close()
    return seen / elapsed


def bench_raw_read(directory: Path) -> float:
    """Read the log's segment files line by line, doing nothing else: the reference."""
    segments = sorted(directory.rglob("*.jsonl"))
    started = time.perf_counter()
    lines = 0
    for segment in segments:
        with segment.open("rb") as file:
            for _line in file:
                lines += 1
    return lines / (time.perf_counter() - started)


def main() -> None:
    """Run the measurements side by side, ``ROUNDS`` times interleaved (each round is
    ~0.2 s, so one noisy moment would decide a single run), and print the medians."""
    keep_freed_memory()  # as every cdc command does (cdc.memory)
    batches = _events()
    payloads = [b"".join(r.value + b"\n" for r in batch) for batch in batches]
    figures: dict[str, list[float]] = {"raw": [], "append": [], "read": [], "raw_read": []}
    for _round in range(ROUNDS):
        work = Path(tempfile.mkdtemp(prefix="bench-log-"))
        try:
            figures["raw"].append(bench_raw(work, payloads))
            figures["append"].append(bench_append(work / "log", batches))
            figures["read"].append(bench_read(work / "log", BATCH * BATCHES))
            figures["raw_read"].append(bench_raw_read(work / "log"))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    raw, append, read, raw_read = (statistics.median(figures[name])
                                   for name in ("raw", "append", "read", "raw_read"))
    print(f"raw_write_events_per_s={raw:.0f}")
    print(f"log_append_events_per_s={append:.0f}")
    print(f"log_read_events_per_s={read:.0f}")
    print(f"raw_read_events_per_s={raw_read:.0f}")
    print(f"log_read_ratio_vs_raw_read={read / raw_read:.2f}")
    print(f"log_append_ratio_vs_raw_write={append / raw:.2f}")


if __name__ == "__main__":
    main()
