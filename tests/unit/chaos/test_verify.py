"""The chaos checks count what they should: lost, duplicated, out of order, wrong image,
rows missing, extra or different in the log's replay, what reconcile reports of the sinks
(so a clean chaos run means something)."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable
from typing import cast

from cdc.config import PipelineConfig
from chaos.__main__ import report
from chaos.faults import FaultPlan, schedule
from chaos.harness import ChaosResult
from chaos.verify import Change, Findings, compare_log, compare_rows, reconcile_sinks
from chaos.workload import WorkloadStats
from connectors.reconcile.catchup import CatchUpTimeoutError
from connectors.reconcile.check import Summary

ROW = {"tenant": 1, "id": 7, "qty": 3, "body": "md5"}


def audit() -> dict[tuple[str, str], list[Change]]:
    return {("items", "1:7"): [Change(10, "c", ROW), Change(11, "u", {**ROW, "qty": 4}),
                               Change(12, "d", None)],
            ("items", "{}"): [Change(13, "t", None)]}


def test_an_identical_log_is_clean() -> None:
    found = Findings()
    compare_log(audit(), audit(), found)
    assert (found.lost, found.duplicated, found.diverged) == (0, 0, 0)
    assert found.committed == found.logged == 4


def test_lost_and_duplicated_changes_are_counted() -> None:
    logged = audit()
    logged["items", "1:7"] = [logged["items", "1:7"][0], logged["items", "1:7"][0],
                              logged["items", "1:7"][2]]
    del logged["items", "{}"]
    found = Findings()
    compare_log(audit(), logged, found)
    assert (found.lost, found.duplicated) == (2, 1)
    assert any("lost" in problem for problem in found.problems)


def test_order_and_images_are_checked() -> None:
    logged = audit()
    changes = logged["items", "1:7"]
    logged["items", "1:7"] = [changes[1], changes[0], changes[2]]
    found = Findings()
    compare_log(audit(), logged, found)
    assert found.misordered == 1 and found.diverged == 1

    logged = audit()
    logged["items", "1:7"][1] = Change(11, "u", {**ROW, "qty": 5})
    found = Findings()
    compare_log(audit(), logged, found)
    assert found.wrong_images == 1
    # an unchanged TOAST column is not compared (the log does not carry it)
    logged["items", "1:7"][1] = Change(11, "u", {"tenant": 1, "id": 7, "qty": 4}, ("body",))
    found = Findings()
    compare_log(audit(), logged, found)
    assert found.wrong_images == 0


def test_log_replay_rows_missing_extra_and_different() -> None:
    want = {"1:1": {"id": 1}, "1:2": {"id": 2}, "1:3": {"id": 3}}
    got = {"1:1": {"id": 1}, "1:3": {"id": 30}, "1:4": {"id": 4}}
    found = Findings()
    compare_rows("log replay items", want, got, found)
    assert found.log_rows_diverged == 3 and found.diverged == 3 and len(found.problems) == 3
    assert found.sink_rows_diverged == 0


def fake_reconcile(lines: list[str], counts: dict[str, int]) -> Callable[..., Summary]:
    def reconcile(config: object, *, report: Callable[[str], None]) -> Summary:
        for line in lines:
            report(line)
        return Summary(tables=3, rows=90, counts=Counter(counts))
    return reconcile


def test_the_sinks_diverge_by_what_reconcile_reports() -> None:
    found = Findings()
    reconcile_sinks(cast(PipelineConfig, None), found, fake_reconcile(
        ["missing public.items search index chaos_items 1:2: the row has no record",
         "extra public.items cache redis chaos:items:1:4: no such row in the table"],
        {"missing": 1, "extra": 1}))
    assert found.sink_rows_diverged == 2 and found.diverged == 2
    assert found.reconcile_summary == ("reconcile: tables=3 rows=90 missing=1 extra=1 "
                                       "different=0")
    assert [p.split(" public")[0] for p in found.problems] == ["reconcile: missing",
                                                              "reconcile: extra"]


def test_clean_sinks_do_not_diverge() -> None:
    found = Findings()
    reconcile_sinks(cast(PipelineConfig, None), found, fake_reconcile([], {}))
    assert (found.diverged, found.problems) == (0, [])
    assert found.reconcile_summary.endswith("missing=0 extra=0 different=0")


def test_a_reconcile_that_cannot_finish_is_a_divergence() -> None:
    def unreachable(config: object, *, report: Callable[[str], None]) -> Summary:
        raise CatchUpTimeoutError("connector 'cache' has not consumed\n  in time")

    found = Findings()
    reconcile_sinks(cast(PipelineConfig, None), found, unreachable)
    assert found.diverged == 1
    assert found.reconcile_summary == ("reconcile: could not finish: connector 'cache' has "
                                       "not consumed in time")


def test_the_report_prints_the_reconcile_line_just_before_the_last() -> None:
    found = Findings(reconcile_summary="reconcile: tables=3 rows=9 missing=0 extra=0 "
                                       "different=0")
    result = ChaosResult(runs=2, faults={"kill_capture": 1, "stall_capture": 2},
                         fault_errors=[], workload=WorkloadStats(), findings=found,
                         unexpected_exits=0, takeovers=2)
    lines = report(result).splitlines()
    assert lines[-2] == found.reconcile_summary
    assert lines[-1] == "chaos: runs=2 faults=3 takeovers=2 lost=0 duplicated=0 diverged=0"


def test_the_schedule_holds_every_fault_within_the_run() -> None:
    plan = FaultPlan(kill_capture=22, kill_connect=22, stop_opensearch=1, stop_redis=1,
                     restart_postgres=2, fill_disk=1, outage_s=60, disk_full_s=20)
    timed = schedule(plan, 600, random.Random(1))
    kinds = [kind for _, kind in timed]
    assert kinds.count("kill_capture") == 22 and kinds.count("kill_connect") == 22
    assert kinds.count("restart_postgres") == 2 and kinds.count("fill_disk") == 1
    assert all(0 < at < 600 for at, _ in timed)
    assert [at for at, _ in timed] == sorted(at for at, _ in timed)
    outage = next(at for at, kind in timed if kind == "stop_opensearch")
    assert outage + 60 < 600, "the outage ends before the workload does"


def test_broker_kills_are_spread_and_stalls_fall_anywhere() -> None:
    plan = FaultPlan(kill_capture=2, kill_connect=0, stop_opensearch=0, stop_redis=0,
                     restart_postgres=0, fill_disk=0, outage_s=30, disk_full_s=0,
                     stall_capture=10, kill_broker=3)
    timed = schedule(plan, 300, random.Random(3))
    kinds = [kind for _, kind in timed]
    assert kinds.count("stall_capture") == 10 and kinds.count("kill_broker") == 3
    brokers = [at for at, kind in timed if kind == "kill_broker"]
    gaps = [later - earlier for earlier, later in itertools.pairwise(brokers)]
    assert min(gaps) >= 30, "one broker down at a time: each outage ends before the next"
    assert brokers[-1] + 30 < 300
