"""Every type family with its edge values, through the initial snapshot and the stream,
compared with what PostgreSQL itself returns (``oracle``) — in a default database, in one
whose settings differ from every default the codecs read, and in a LATIN1 database. After
each scenario, applying the log reproduces the table."""

from __future__ import annotations

import itertools
from typing import Any

import psycopg
import pytest
from psycopg import sql

from .catalogue import columns, row_count
from .conftest import MakeScenario
from .scenario import create_table, expected_rows, fill, mismatches, replayed, server_major

ODD_SETTINGS = {"DateStyle": "SQL, DMY", "IntervalStyle": "sql_standard",
                "extra_float_digits": "0", "bytea_output": "escape",
                "TimeZone": "Asia/Kathmandu"}
SCENARIOS = {"default": ({}, False), "odd_settings": (ODD_SETTINGS, False),
             "latin1": ({}, True)}


@pytest.mark.parametrize("scenario_name", list(SCENARIOS))
def test_every_type_through_snapshot_and_stream(make_scenario: MakeScenario,
                                                scenario_name: str) -> None:
    settings, latin1 = SCENARIOS[scenario_name]
    scenario = make_scenario(settings=settings, latin1=latin1)
    with psycopg.connect(scenario.dsn) as conn:  # the scenario is what it claims to be
        for setting, value in settings.items():
            shown = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(setting))).fetchone()
            assert shown is not None and shown[0] == value, (setting, shown)
        encoding = conn.execute("SHOW server_encoding").fetchone()
        assert encoding == ("LATIN1" if latin1 else "UTF8",)
    cols = columns(latin1=latin1, server_major=server_major(scenario.dsn))
    rows = row_count(cols)
    table = create_table(scenario, "public", "every_type", cols)
    ids = itertools.count(1)
    fill(scenario, table, cols, ids, rows)  # before the capture: the initial snapshot
    scenario.start_capture()
    fill(scenario, table, cols, ids, rows)  # streamed
    scenario.sql(sql.SQL("UPDATE every_type SET i4 = i4 - 1, t = 'updated' WHERE id = {}")
                 .format(rows + 1),
                 sql.SQL("DELETE FROM every_type WHERE id = {}").format(rows + 2))

    def complete(events: list[dict[str, Any]]) -> bool:
        return any(e["op"] == "d" for e in events)

    events = scenario.wait_for("public", "every_type", complete)
    expected = expected_rows(scenario.dsn, "public", "every_type", "id", cols)
    snapshot = {e["after"]["id"]: e["after"] for e in events if e["op"] == "r"}
    inserted = {e["after"]["id"]: e["after"] for e in events if e["op"] == "c"}
    assert sorted(snapshot) == list(range(1, rows + 1)), "one snapshot event per row"
    assert sorted(inserted) == list(range(rows + 1, 2 * rows + 1)), "one insert per row"
    # the streamed copies hold the same values as the snapshot rows (row n + rows = row n)
    as_inserted = {k: v for k, v in expected.items() if k <= rows}
    as_inserted.update({k + rows: {**v, "id": k + rows} for k, v in as_inserted.items()})
    updated = {k: v for k, v in inserted.items() if k != rows + 1}
    problems = mismatches(as_inserted, {**snapshot, **updated, rows + 1: as_inserted[rows + 1]},
                          "snapshot/stream")
    (update,) = [e for e in events if e["op"] == "u"]
    (delete,) = [e for e in events if e["op"] == "d"]
    resent = {k: v for k, v in expected[rows + 1].items() if k not in update["unchanged"]}
    problems += mismatches({rows + 1: resent}, {rows + 1: update["after"]}, "update after")
    problems += mismatches({rows + 1: as_inserted[rows + 1]}, {rows + 1: update["before"]},
                           "update before (REPLICA IDENTITY FULL)")
    problems += mismatches({rows + 2: as_inserted[rows + 2]}, {rows + 2: delete["before"]},
                           "delete before (REPLICA IDENTITY FULL)")
    problems += mismatches(expected, replayed(events, "id"), "replayed log")
    assert not problems, f"{len(problems)} values differ:\n" + "\n".join(problems)
