"""The short chaos run (``python -m chaos --short``) inside the test suite.

Its own PostgreSQL, Redis and OpenSearch, the log on a small tmpfs, ``cdc capture`` and
``cdc connect`` as child processes, a few faults of each kind under a mixed workload;
then the log must equal the audit table and both sinks the final tables.
"""

from __future__ import annotations

import pytest

from chaos.harness import run_chaos, short_options

pytestmark = pytest.mark.integration


def test_short_chaos_run_loses_duplicates_and_diverges_nothing() -> None:
    result = run_chaos(short_options(duration=40, seed=7))
    found = result.findings
    print(result.summary())
    assert found.problems == [], found.problems
    assert result.fault_errors == [], result.fault_errors
    assert result.faults == {"kill_capture": 3, "kill_connect": 3, "stop_opensearch": 1,
                             "stop_redis": 1, "restart_postgres": 1, "fill_disk": 1}
    assert result.runs >= 2 + 3 + 3, "every kill started a new run"
    assert found.committed > 1_000 and found.logged == found.committed
    assert result.workload.large_transactions >= 2 and result.workload.truncates >= 1
    assert (found.lost, found.duplicated, found.diverged, found.dead_letters) == (0, 0, 0, 0)
