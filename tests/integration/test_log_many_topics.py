"""The file log at the scale of a big schema: 2,000 topics x 3 partitions appended and
read back by a group consumer in a process whose soft ``RLIMIT_NOFILE`` is 1,024, with
its open descriptors (``/proc/self/fd``) staying at most 256 the whole time."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

TOPICS = 2000
PARTITIONS = 3
MAX_FDS = 256

CHILD = textwrap.dedent("""
    import json, os, resource, sys, time
    from cdc.log import Position, Record, StartAt, partition_for
    from cdc.log.file import FileLog, FileLogSettings

    root, topics, partitions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    peak = 0

    def sample():
        global peak
        peak = max(peak, len(os.listdir("/proc/self/fd")))

    keys = {}  # a key for each partition
    for k in range(1000):
        keys.setdefault(partition_for(b'{"id":%d}' % k, partitions), k)
        if len(keys) == partitions:
            break
    log = FileLog(root, FileLogSettings(default_partitions=partitions))
    producer = log.producer()
    consumer = log.consumer("scale", pattern=r"app\\.public\\..*", start=StartAt.earliest())
    lsn, expected, seen = 1000, set(), set()

    def consume(until):
        deadline = time.monotonic() + 120
        while len(seen) < until and time.monotonic() < deadline:
            for m in consumer.poll(5000, timeout=0.5):
                seen.add((m.topic, m.partition, m.offset))
            sample()
        consumer.commit()

    for rounds in range(2):
        for first in range(0, topics, 250):  # a transaction per 250 tables
            batch = []
            for t in range(first, min(first + 250, topics)):
                for p in range(partitions):
                    lsn += 1
                    batch.append(Record(f"app.public.t{t:04d}", b'{"id":%d}' % keys[p],
                                        b'{"round":%d}' % rounds, Position(lsn, 0)))
                    expected.add((f"app.public.t{t:04d}", p, rounds))
            producer.append(batch)
            sample()
        consume(len(expected))
    print(json.dumps({"expected": len(expected), "read": len(seen),
                      "partitions_read": len({(t, p) for t, p, _ in seen}),
                      "offsets_ok": seen == expected, "peak_fds": peak,
                      "pool_peak": log.handles.peak}))
    consumer.close()
    log.close()
""")


def test_thousands_of_topics_under_a_small_descriptor_limit(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "log"), str(TOPICS),
                           str(PARTITIONS)], cwd=repo, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["expected"] == TOPICS * PARTITIONS * 2
    assert result["read"] == result["expected"]
    assert result["partitions_read"] == TOPICS * PARTITIONS
    assert result["offsets_ok"], "each partition holds offsets 0 and 1, read once each"
    assert result["peak_fds"] <= MAX_FDS, result
    assert result["pool_peak"] <= 128
