"""The soak's figures mean what they say: growth between thirds per role (a restart or a
passing spike is not growth), lag p99 outside the faults' windows, catch-up from a fault's
end, disk growth after retention, and the lag of a sink as committed-but-not-shown."""

from __future__ import annotations

import math

import pytest

from soak.figures import (
    Fault,
    LagSample,
    Sample,
    Thirds,
    catchup,
    clock_lag,
    disk_growth,
    growth,
    lag_p99,
)
from soak.probes import ProcessStats

THIRDS = Thirds(warmup=30, end=330)  # thirds: [30, 130), [130, 230), [230, 330]


def samples(rss: dict[str, list[float]], fds: int = 20) -> list[Sample]:
    length = len(next(iter(rss.values())))
    return [Sample(t=30 + 300 * i / (length - 1),
                   processes={role: ProcessStats(values[i], fds, 5)
                              for role, values in rss.items()})
            for i in range(length)]


def test_growth_is_the_largest_median_difference_of_any_role() -> None:
    flat = [100.0] * 31
    leaking = [100.0 + i for i in range(31)]
    found = growth(samples({"capture": flat, "cache": leaking}), THIRDS, lambda p: p.rss_mb)
    assert found == pytest.approx(20.0, abs=1.0)
    assert growth(samples({"capture": flat}), THIRDS, lambda p: p.rss_mb) == 0


def test_a_spike_or_a_restart_in_the_middle_is_not_growth() -> None:
    spiky = [100.0] * 31
    spiky[15] = 900.0  # the middle third
    spiky[5] = 700.0  # one sample of the first third: the median ignores it
    assert growth(samples({"search": spiky}), THIRDS, lambda p: p.rss_mb) == 0


def test_a_shrinking_process_counts_as_no_growth() -> None:
    assert growth(samples({"search": [200.0 - i for i in range(31)]}), THIRDS,
                  lambda p: p.rss_mb) == 0


def lags(values: list[float | None]) -> list[LagSample]:
    return [LagSample(float(t), value, value) for t, value in enumerate(values)]


def test_lag_p99_leaves_out_each_fault_until_caught_up() -> None:
    values: list[float | None] = [0.1] * 200
    values[100:110] = [None] * 5 + [30.0, 20.0, 5.0, 0.9, 0.1]  # an outage, then catching up
    faults = [Fault("redis_outage", 100, 105)]
    assert lag_p99(lags(values), faults, warmup=0, end=200) == pytest.approx(0.1)
    assert lag_p99(lags(values), [], warmup=0, end=200) == math.inf  # None: never answered
    assert catchup(lags(values), faults, end=200) == {"redis_outage": 3.0}


def test_lag_p99_counts_spikes_outside_faults() -> None:
    values: list[float | None] = [0.1] * 100
    values[50] = values[51] = 4.0  # 2 % of the samples
    assert lag_p99(lags(values), [], warmup=0, end=100) == 4.0
    values[51] = 0.1  # 1 %: the 99th percentile is below it
    assert lag_p99(lags(values), [], warmup=0, end=100) == pytest.approx(0.1)


def test_a_fault_never_caught_up_counts_until_the_end() -> None:
    values: list[float | None] = [*([0.1] * 10), *([5.0] * 90)]
    assert catchup(lags(values), [Fault("kill_connector", 10, 10)], end=100) == {
        "kill_connector": 90.0}


def test_disk_growth_is_judged_after_retention_acted() -> None:
    log = [Sample(t=float(t), processes={}, log_mb=min(t, 200) * 1.0) for t in range(0, 1000)]
    thirds = Thirds(warmup=0, end=999)
    assert disk_growth(log, thirds, retention_s=140) == 0  # flat from 200 s on
    growing = [Sample(t=float(t), processes={}, log_mb=t * 0.1) for t in range(0, 1000)]
    assert disk_growth(growing, thirds, retention_s=140) == pytest.approx(53.3, abs=1)
    assert math.isnan(disk_growth(log, Thirds(0, 100), retention_s=140))


def test_clock_lag_is_the_wait_of_the_oldest_change_not_shown() -> None:
    committed = [1_000_000, 2_000_000, 3_000_000]
    assert clock_lag(3_000_000, committed, now_us=9_000_000) == 0  # shows the newest
    assert clock_lag(1_000_000, committed, now_us=4_500_000) == pytest.approx(2.5)
    assert clock_lag(0, committed, now_us=4_000_000) == pytest.approx(3.0)
    assert clock_lag(None, committed, now_us=4_000_000) is None


def test_one_sample_under_the_bar_between_late_ones_is_no_recovery() -> None:
    values: list[float | None] = [0.1] * 100
    values[20:40] = [5.0, 0.5, 3.0, 0.4, 2.0, *([1.5] * 15)]  # flickering after the fault
    faults = [Fault("opensearch_outage", 10, 20)]
    assert catchup(lags(values), faults, end=100) == {"opensearch_outage": 20.0}
    assert lag_p99(lags(values), faults, warmup=0, end=100) == pytest.approx(0.1)


def test_a_sawtooth_kept_flat_by_retention_is_no_growth() -> None:
    saw = [Sample(t=float(t), processes={}, log_mb=300 + (t % 180) * 3.0) for t in range(1000)]
    assert disk_growth(saw, Thirds(warmup=0, end=999), retention_s=140) == 0
    rising = [Sample(t=float(t), processes={}, log_mb=300 + t * 0.2 + (t % 180) * 3.0)
              for t in range(1000)]
    assert disk_growth(rising, Thirds(warmup=0, end=999), retention_s=140) > 50
