"""The initial snapshot: rows that existed before the slot, then the stream, no gap."""

from __future__ import annotations

from collections.abc import Callable

import orjson

from cdc.capture.runner import Capture

from .conftest import CaptureEnv


def test_existing_rows_are_read_then_changes_stream(capture_env: CaptureEnv,
                                                    run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    env.sql("CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric(12,2))",
            "INSERT INTO accounts SELECT g, 'owner ' || g, g * 1.5 FROM generate_series(1, 2500) g")
    run_capture()
    env.sql("UPDATE accounts SET balance = 0 WHERE id = 7",
            "INSERT INTO accounts VALUES (5000, 'late', 1)")
    events = [orjson.loads(m.value) for m in env.wait_for("accounts", 2502)]
    reads = [e for e in events if e["op"] == "r"]
    assert len(reads) == 2500
    assert sorted(e["key"]["id"] for e in reads) == list(range(1, 2501))
    assert all(e["source"]["snapshot"] is True for e in reads)
    by_id = {e["key"]["id"]: e for e in reads}
    assert by_id[7]["after"] == {"id": 7, "owner": "owner 7", "balance": "10.50"}
    assert [(e["op"], e["key"]["id"]) for e in events[2500:]] == [("u", 7), ("c", 5000)]
    assert events[2500]["after"]["balance"] == "0.00"
    assert events[2500]["source"]["snapshot"] is False
    assert len(events) == 2502, "no overlap between the snapshot and the stream"
