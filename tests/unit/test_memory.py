"""``cdc.memory.keep_freed_memory``: per-batch buffers stop faulting their pages in again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# buffers of 256 KiB to 2.3 MiB, allocated and freed in turn, like a capture's batches;
# prints the page faults they cost
CHURN = """
import resource, sys
from cdc.memory import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
    assert keep_freed_memory()  # once is enough; again is harmless
chunk = b"x" * 4096
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(300):
    data = chunk * (64 + (i * 37) % 512)
    del data
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    result = subprocess.run([sys.executable, "-c", CHURN, mode], cwd=REPO, check=True,
                            capture_output=True, text=True)
    return int(result.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_buffers_are_reused_instead_of_faulted_in_again() -> None:
    default, kept = _faults("default"), _faults("keep")
    assert kept * 4 < default, (default, kept)


# young collections, per the thresholds: fewer with the collector spared
CYCLES = """
import gc, sys
from cdc.memory import YOUNG_COLLECTION, spare_the_cycle_collector
if sys.argv[1] == "spare":
    spare_the_cycle_collector()
    assert gc.get_threshold()[0] == YOUNG_COLLECTION and gc.get_freeze_count() > 0
before = gc.get_stats()[0]["collections"]
batch = [{"row": n, "values": [n]} for n in range(100_000)]
print(gc.get_stats()[0]["collections"] - before)
"""


def test_a_spared_collector_collects_the_young_far_less_often() -> None:
    runs = {mode: int(subprocess.run([sys.executable, "-c", CYCLES, mode], cwd=REPO,
                                     check=True, capture_output=True, text=True).stdout)
            for mode in ("default", "spare")}
    assert runs["default"] > 100  # 200,000 containers: one collection per 700
    assert runs["spare"] < runs["default"] / 10


# a fragmented heap: 200 MB of blocks freed but every 64th, the survivors pinning the
# pages between them; prints the resident MB after the free, and after a release
FRAGMENTED = """
import sys
from cdc.memory import release_free_memory
def rss_mb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024
blocks = [bytes(2000 + n % 7) for n in range(100_000)]
survivors = blocks[::64]
del blocks
freed = rss_mb()
released = release_free_memory() if sys.argv[1] == "release" else False
print(freed, rss_mb(), released)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_free_pages_inside_the_heap_go_back_to_the_kernel() -> None:
    def run(mode: str) -> tuple[float, float, str]:
        out = subprocess.run([sys.executable, "-c", FRAGMENTED, mode], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout.split()
        return float(out[0]), float(out[1]), out[2]
    freed, kept, _ = run("keep")
    assert kept > freed - 20 and kept > 150, "the free pages stay resident by themselves"
    freed, after, released = run("release")
    assert released == "True"
    assert after < freed - 150, (freed, after)


def test_one_release_thread_per_process() -> None:
    from cdc.memory import release_free_memory_periodically
    first = release_free_memory_periodically(3600)
    assert first.daemon and first.is_alive()
    assert release_free_memory_periodically(3600) is first
