"""``derived.fill_unchanged``: the shared cases, and what the function promises callers."""

from __future__ import annotations

from typing import Any

import pytest

from derived import fill_unchanged

from .toast_cases import CASES, ToastCase


def fold(case: ToastCase) -> tuple[dict[str, Any], frozenset[str]]:
    """The key's events through ``fill_unchanged``, each filled from the row before it."""
    earlier: dict[str, Any] | None = None
    missing: frozenset[str] = frozenset()
    for event in case.events:
        if event.after is None:
            earlier = None
            continue
        filled = fill_unchanged(event.after, event.unchanged, earlier, event.before)
        earlier, missing = filled.row, filled.missing
    assert earlier is not None
    return earlier, missing


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_shared_cases(case: ToastCase) -> None:
    assert fold(case) == (case.row, case.missing)


def test_nothing_unchanged_returns_after_itself() -> None:
    after = {"id": 1, "body": "x"}
    assert fill_unchanged(after, [], {"body": "y"}).row is after
    assert fill_unchanged(after, None).row is after


def test_the_first_source_holding_a_column_wins_and_none_is_skipped() -> None:
    after = {"id": 1}
    filled = fill_unchanged(after, ["a", "b", "c"], None, {"a": 1}, {"a": 2, "b": None})
    assert filled.row == {"id": 1, "a": 1, "b": None}
    assert filled.missing == {"c"}
    assert after == {"id": 1}  # never changed in place
