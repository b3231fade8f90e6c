"""The short chaos run (``python -m chaos --short``) inside the test suite, on both logs.

Its own PostgreSQL, Redis and OpenSearch; the log on a small tmpfs (file backend, one
``cdc capture``) or on a 3-broker Kafka cluster (two ``cdc capture`` replicas; the
streaming one is also stalled past the takeover time, and a broker is killed);
``cdc connect`` beside them, all child processes. The initial snapshot is
killed in its middle, a migration runs during it and rows are deleted while it is down;
then a few faults of each kind under a mixed workload. The log must equal the audit
table (and, replayed, the final tables), and both sinks the final tables.
"""

from __future__ import annotations

import dataclasses

import pytest

from chaos.harness import run_chaos, short_options

pytestmark = pytest.mark.integration

SNAPSHOT_FAULTS = {"kill_in_snapshot": 1, "ddl_in_snapshot": 1, "deletes_while_interrupted": 1}


@pytest.mark.parametrize("backend", ["file", "kafka"])
def test_short_chaos_run_loses_duplicates_and_diverges_nothing(
        backend: str, request: pytest.FixtureRequest) -> None:
    cluster = request.getfixturevalue("kafka_cluster") if backend == "kafka" else None
    options = dataclasses.replace(short_options(duration=30, seed=7), backend=backend,
                                  kafka_cluster=cluster)
    result = run_chaos(options)
    found = result.findings
    print(result.summary())
    assert found.problems == [], found.problems
    assert result.fault_errors == [], result.fault_errors
    by_backend = ({"fill_disk": 1} if backend == "file"
                  else {"stall_capture": 1, "kill_broker": 1})
    assert result.faults == {"kill_capture": 3, "kill_connect": 3, "stop_opensearch": 1,
                             "stop_redis": 1, "restart_postgres": 1, **by_backend,
                             **SNAPSHOT_FAULTS}
    # a kill or stall of the streaming replica hands the slot to the other one
    assert result.takeovers >= (1 if backend == "kafka" else 0)
    assert result.runs >= 3 + 3 + 3, "every kill started a new run"
    assert found.committed > 1_000 and found.logged == found.committed
    assert result.workload.large_transactions >= 2 and result.workload.truncates >= 1
    assert (found.lost, found.duplicated, found.diverged, found.dead_letters) == (0, 0, 0, 0)
