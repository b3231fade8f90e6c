"""A table dropped and created again under the same name: the log gets a truncate before
the first event of the new table, so applying the log gives the new table only (no row
of the old one survives downstream)."""

from __future__ import annotations

from typing import Any

from .conftest import MakeScenario
from .scenario import replayed


def test_drop_and_recreate_leaves_only_the_new_table(make_scenario: MakeScenario) -> None:
    scenario = make_scenario(types=False)
    scenario.sql("CREATE TABLE t (id int PRIMARY KEY, v text)",
                 "INSERT INTO t SELECT g, 'old ' || g FROM generate_series(1, 5) g")
    scenario.start_capture()
    scenario.sql("INSERT INTO t VALUES (6, 'old 6')")
    scenario.sql("DROP TABLE t")
    scenario.sql("CREATE TABLE t (id int PRIMARY KEY, v text, extra int)",
                 "INSERT INTO t VALUES (2, 'new 2', 20), (7, 'new 7', 70)")
    scenario.sql("INSERT INTO t VALUES (8, 'new 8', 80)")

    def complete(events: list[dict[str, Any]]) -> bool:
        return any(e["op"] == "c" and e["after"]["id"] == 8 for e in events)

    events = scenario.wait_for("public", "t", complete)
    ops = [e["op"] for e in events]
    first_new = next(i for i, e in enumerate(events) if e["after"] and "extra" in e["after"])
    assert "t" in ops[:first_new], f"no truncate before the new table's first event: {ops}"
    assert replayed(events, "id") == {
        2: {"id": 2, "v": "new 2", "extra": 20}, 7: {"id": 7, "v": "new 7", "extra": 70},
        8: {"id": 8, "v": "new 8", "extra": 80}}
