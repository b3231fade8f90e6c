from __future__ import annotations

import pytest

from cdc.observability.samples import Sample, SampleHistory, throughput


def test_throughput_is_events_over_time_between_samples() -> None:
    assert throughput(Sample(10.0, events=100), Sample(12.0, events=160)) == 30.0


def test_throughput_needs_two_counts_and_time_passing() -> None:
    assert throughput(None, Sample(1.0, events=5)) is None
    assert throughput(Sample(1.0), Sample(2.0, events=5)) is None
    assert throughput(Sample(2.0, events=1), Sample(2.0, events=5)) is None


def test_a_counter_that_restarted_counts_from_zero() -> None:
    assert throughput(Sample(0.0, events=1000), Sample(2.0, events=10)) == 5.0


def test_history_fills_in_throughput_and_keeps_the_window() -> None:
    history = SampleHistory(interval_s=1.0, window_s=5.0)
    for second in range(10):
        history.add(Sample(float(second), events=second * 7, lag_bytes=second,
                           connector_lag={"cache": second}))
    kept = history.samples()
    assert [s.at for s in kept] == [4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    assert all(s.events_per_s == 7.0 for s in kept)
    document = history.as_json()
    assert document["interval_s"] == 1.0 and document["window_s"] == 5.0
    assert document["samples"][-1] == {"t": 9.0, "events": 63, "events_per_s": 7.0,
                                       "lag_bytes": 9, "lag_seconds": None,
                                       "retained_bytes": None, "connector_lag": {"cache": 9}}
    assert history.latest is kept[-1]


def test_history_rejects_a_zero_interval() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        SampleHistory(0)
