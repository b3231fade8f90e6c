"""The initial snapshot's records read back, and what an interrupted one leaves to stream."""

from __future__ import annotations

from typing import Any

import orjson

from cdc.capture.snapshot.resume import (
    initial_snapshot,
    request_records,
    tables_to_stream,
)

SLOT = "s1"


def started(tables: list[str] | None, point: str = "0/100") -> dict[str, Any]:
    record: dict[str, Any] = {"slot": SLOT, "state": "started", "consistent_point": point}
    if tables is not None:
        record["tables"] = tables
    return record


def read(*tables: str, slot: str = SLOT, point: str = "0/100") -> dict[str, Any]:
    return {"slot": slot, "kind": "initial_tables", "consistent_point": point,
            "tables": list(tables)}


def test_the_tables_read_since_the_latest_start_count() -> None:
    records = [started(["public.a", "public.b"], "0/50"), read("public.a", point="0/50"),
               read("public.b", point="0/900"),  # another partition: before its start
               started(["public.a", "public.b", "public.c"], "0/900"),
               read("public.c", slot="other", point="0/900"),
               {"kind": "incremental", "table": "public.a", "state": "running"}]
    found = initial_snapshot(records, SLOT)
    assert found.state == "started"
    assert found.consistent_point == 0x900
    assert found.read == {"public.b"}, "a new slot's snapshot starts from nothing"
    assert found.tables == ["public.a", "public.b", "public.c"]


def test_completed_and_never_taken() -> None:
    done = initial_snapshot([started(None), read("public.a"),
                             {"slot": SLOT, "state": "completed", "consistent_point": "0/100"}],
                            SLOT)
    assert done.state == "completed" and done.tables is None and done.read == {"public.a"}
    assert initial_snapshot([], SLOT).state is None
    assert initial_snapshot([{"slot": SLOT}], SLOT).state == "completed", "oldest records"


def test_what_is_left_to_the_stream() -> None:
    found = initial_snapshot([started(["public.a", "public.b", "public.c", "public.d"]),
                              read("public.a")], SLOT)
    published = ["public.a", "public.b", "public.c", "public.e"]  # d dropped, e new
    assert tables_to_stream(found, published, active={"public.c"}) == ["public.b"]
    older = initial_snapshot([started(None)], SLOT)  # no table list: the publication's
    assert tables_to_stream(older, published, active=()) == published


def test_requests_are_incremental_snapshot_records() -> None:
    (record,) = request_records("app", ["public.b"])
    value = orjson.loads(record.value)
    assert record.topic == "app._snapshots"
    assert (value["kind"], value["table"], value["state"], value["request_lsn"]) == (
        "incremental", "public.b", "requested", "0/0")
