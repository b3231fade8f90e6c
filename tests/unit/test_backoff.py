"""``ExponentialBackoff``: delays that double up to a cap, with or without full jitter."""

from __future__ import annotations

import pytest

from cdc.backoff import ExponentialBackoff


def test_the_delay_doubles_with_each_failure_in_a_row() -> None:
    backoff = ExponentialBackoff(first_s=0.01, max_s=10.0)
    assert [backoff.delay(n) for n in range(1, 6)] == [0.01, 0.02, 0.04, 0.08, 0.16]


def test_the_delay_stops_growing_at_its_cap() -> None:
    backoff = ExponentialBackoff(first_s=0.5, max_s=30.0)
    assert [backoff.delay(n) for n in range(5, 10)] == [8.0, 16.0, 30.0, 30.0, 30.0]
    assert backoff.delay(10**6) == 30.0  # doubling past any float still waits the cap


def test_before_the_first_failure_the_delay_is_the_first() -> None:
    assert ExponentialBackoff(first_s=1.0, max_s=4.0).delay(0) == 1.0


def test_a_zero_first_delay_never_grows() -> None:
    assert ExponentialBackoff(first_s=0.0, max_s=4.0).delay(10**6) == 0.0


@pytest.mark.parametrize("attempt", [1, 3, 8, 10**4])
@pytest.mark.parametrize("draw", [0.0, 0.25, 0.999])
def test_full_jitter_is_anywhere_from_zero_up_to_the_delay(attempt: int, draw: float) -> None:
    backoff = ExponentialBackoff(first_s=0.5, max_s=4.0)
    jittered = backoff.full_jitter(attempt, draw)
    assert 0.0 <= jittered <= backoff.delay(attempt)
    assert jittered == draw * backoff.delay(attempt)
