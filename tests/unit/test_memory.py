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
