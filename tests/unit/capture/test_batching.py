"""The group commit's batch bounds: latency while live, size while catching up."""

from __future__ import annotations

from cdc.capture.stream.batching import BatchLimits, GroupCommit
from cdc.log import Record

LIMITS = BatchLimits(events=100, max_age_s=0.05, backlog_lag_s=1.0, backlog_max_age_s=1.0,
                     backlog_events=400, max_bytes=10_000, backlog_spread_events=2_000,
                     events_per_topic=50)
NOW_US = 1_000_000_000
LIVE = NOW_US - 200_000  # committed 0.2 s ago
BEHIND = NOW_US - 5_000_000  # committed 5 s ago


def group() -> GroupCommit:
    return GroupCommit(LIMITS, lambda: NOW_US)


def records(count: int, size: int = 10, topics: int = 1) -> list[Record]:
    return [Record(f"t{i % topics}", b"k", b"v" * size) for i in range(count)]


def test_live_batches_close_at_the_event_count_or_age() -> None:
    policy = group()
    assert not policy.full(records(99), LIVE)
    assert policy.full(records(100), LIVE)
    assert not policy.due(0.04, LIVE)
    assert policy.due(0.05, LIVE)
    assert policy.due(0.05, 0), "no commit seen yet counts as live"


def test_catching_up_batches_grow_to_the_backlog_bounds() -> None:
    policy = group()
    assert not policy.due(0.5, BEHIND)
    assert policy.due(1.0, BEHIND)
    assert not policy.full(records(100), BEHIND)
    assert not policy.full(records(110), BEHIND), "looked at again a quarter batch later"
    assert not policy.full(records(125), BEHIND)
    assert policy.full(records(400), BEHIND)


def test_catching_up_batches_stop_at_the_byte_bound() -> None:
    policy = group()
    assert not policy.full(records(100, size=50), BEHIND)  # 5,000 bytes
    assert policy.full(records(125, size=100), BEHIND)  # 12,500 bytes


def test_a_closed_batch_starts_over() -> None:
    policy = group()
    assert not policy.full(records(100), BEHIND)
    policy.closed()
    assert policy.full(records(100), LIVE)


def test_a_growing_batch_adds_up_only_its_new_records() -> None:
    policy = group()
    batch = records(100, size=50)  # 5,000 bytes
    assert not policy.full(batch, BEHIND)
    batch += records(25, size=50)  # 6,250
    assert not policy.full(batch, BEHIND)
    batch += records(25, size=200)  # 11,250
    assert policy.full(batch, BEHIND)
    policy.closed()
    assert not policy.full(records(100, size=50), BEHIND)  # a new batch: counted anew


def test_catching_up_batches_over_many_topics_grow_further() -> None:
    policy = group()
    assert not policy.full(records(400, size=1, topics=20), BEHIND), "20 topics * 50 = 1,000"
    assert not policy.full(records(975, size=1, topics=20), BEHIND)
    assert policy.full(records(1_000, size=1, topics=20), BEHIND)
    policy.closed()
    assert not policy.full(records(1_900, size=1, topics=100), BEHIND)
    assert policy.full(records(2_000, size=1, topics=100), BEHIND), "the spread bound"
    policy.closed()
    assert policy.full(records(400, size=1, topics=8), BEHIND), "8 topics * 50 < 400"
    policy.closed()
    assert policy.full(records(2_000, size=1, topics=100), LIVE), "live: at events"
