"""The soak's log check on a compacted log: positions (a record seen again is duplicated,
one going back diverged), the replay against the table (missing rows lost, extra or
different rows diverged), unchanged TOAST columns whose earlier value is gone left out
and counted, not guessed."""

from __future__ import annotations

from typing import Any

import orjson

from cdc.log import Message
from soak.check import Findings, check_topic, comparable

Row = dict[str, Any]


def event(lsn: int, seq: int, op: str, row_id: int, after: Row | None,
          unchanged: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"op": op, "key": {"id": row_id}, "after": after, "unchanged": list(unchanged),
            "source": {"commit_lsn": f"0/{lsn:X}", "seq": seq}}


def messages(events: list[dict[str, Any]], partition: int = 0) -> list[Message]:
    return [Message("soak.public.accounts", partition, offset, 0, b"", orjson.dumps(e),
                    (0, 0), False)  # type: ignore[arg-type]
            for offset, e in enumerate(events)]


def table(*rows: Row) -> dict[str, Row]:
    return {orjson.dumps({"id": row["id"]}).decode(): comparable(row) for row in rows}


ROW = {"id": 1, "balance": 5, "doc": "x" * 3000, "placed_at": "2026-11-28T00:00:00Z"}


def test_a_log_whose_replay_is_the_table_is_clean() -> None:
    found = Findings()
    log = [event(16, 0, "c", 1, {**ROW, "balance": 4}), event(32, 0, "u", 1, {**ROW}),
           event(48, 0, "c", 2, {"id": 2, "balance": 1, "doc": None}),
           event(64, 0, "d", 2, None)]
    check_topic("accounts", messages(log), table(ROW), found)
    assert (found.lost, found.duplicated, found.diverged, found.unresolved) == (0, 0, 0, 0)
    assert found.records == 4


def test_a_record_seen_again_is_duplicated_and_one_going_back_diverged() -> None:
    found = Findings()
    log = [event(16, 0, "c", 1, ROW), event(16, 0, "c", 1, ROW), event(8, 0, "u", 1, ROW)]
    check_topic("accounts", messages(log), table(ROW), found)
    assert (found.duplicated, found.diverged) == (1, 1)


def test_missing_extra_and_different_rows() -> None:
    found = Findings()
    log = [event(16, 0, "c", 2, {"id": 2, "balance": 1, "doc": None}),
           event(32, 0, "c", 3, {"id": 3, "balance": 1, "doc": None})]
    want = table(ROW, {"id": 3, "balance": 2, "doc": None})
    check_topic("accounts", messages(log), want, found)
    assert (found.lost, found.diverged) == (1, 2)  # 1 missing; 2 extra, 3 different


def test_an_unchanged_toast_column_takes_the_previous_value_or_is_left_out() -> None:
    found = Findings()
    log = [event(16, 0, "c", 1, {**ROW, "balance": 1}),
           event(32, 0, "u", 1, {"id": 1, "balance": 5, "placed_at": "z"}, ("doc",))]
    check_topic("accounts", messages(log), table(ROW), found)
    assert (found.diverged, found.unresolved) == (0, 0)  # doc from the first event
    found = Findings()
    compacted = log[1:]  # the first event compacted away: doc unknown, not compared
    check_topic("accounts", messages(compacted), table({**ROW, "doc": "other"}), found)
    assert (found.diverged, found.unresolved) == (0, 1)
    found = Findings()
    check_topic("accounts", messages(compacted), table({**ROW, "balance": 6}), found)
    assert found.diverged == 1  # the known columns still compared


def test_a_wrong_doc_or_amount_is_seen() -> None:
    assert comparable({"doc": "a"}) != comparable({"doc": "b"})
    assert comparable({"amount": "1.50"}) == comparable({"amount": 1.5})
    assert comparable({"amount": "1.50"}) != comparable({"amount": 1.51})
