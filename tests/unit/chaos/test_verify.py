"""The chaos checks count what they should: lost, duplicated, out of order, wrong image,
rows missing, extra or different (so a clean chaos run means something)."""

from __future__ import annotations

import random

from chaos.faults import FaultPlan, schedule
from chaos.verify import Change, Findings, compare_log, compare_rows

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


def test_sink_rows_missing_extra_and_different() -> None:
    want = {"1:1": {"id": 1}, "1:2": {"id": 2}, "1:3": {"id": 3}}
    got = {"1:1": {"id": 1}, "1:3": {"id": 30}, "1:4": {"id": 4}}
    found = Findings()
    compare_rows("redis items", want, got, found)
    assert found.sink_rows_diverged == 3 and len(found.problems) == 3


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
