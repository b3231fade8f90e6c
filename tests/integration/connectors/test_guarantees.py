"""Issue 5's guarantees end to end: capture → file log → OpenSearch and Redis, via a view.

Real PostgreSQL, OpenSearch and Redis; the capture and the connectors run in threads of
the test (``harness``). Convergence: after a random workload (composite keys, TOAST
bodies left unchanged, deletes, a truncate) both sinks equal the table row for row.
Idempotence: rewinding the groups to the earliest offsets and replaying with other
batch sizes ends in the same state, and no version goes down meanwhile.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import pytest
import redis
from opensearchpy import OpenSearch

from . import items
from .conftest import MakeHarness
from .harness import PipelineHarness, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def search(opensearch_url: str, unique_name: str) -> Iterator[OpenSearch]:
    client = OpenSearch(hosts=[opensearch_url], timeout=30)
    yield client
    client.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                          ignore_unavailable=True)
    client.close()


@pytest.fixture
def cache(redis_url: str, unique_name: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    keys = list(client.scan_iter(match=f"*{unique_name}:*", count=1000))
    if keys:
        client.unlink(*keys)
    client.close()


def converged(harness: PipelineHarness, search: OpenSearch, cache: redis.Redis,
              name: str) -> bool:
    want = items.expected(harness)
    return (items.cache_state(cache, name) == want
            and items.records(items.search_state(search, f"{name}_items")) == want)


def run_workload_to_convergence(make_harness: MakeHarness, search: OpenSearch,
                                cache: redis.Redis, name: str, opensearch_url: str,
                                redis_url: str, seed: int) -> PipelineHarness:
    harness = make_harness(items.SCHEMA, items.connectors_yaml(name, opensearch_url, redis_url))
    harness.start_capture()
    harness.start_connector("search")
    harness.start_connector("cache")
    items.workload(harness, seed)
    assert len(items.expected(harness)) > 20, "the workload leaves rows to compare"
    wait_until(lambda: converged(harness, search, cache, name), timeout=60,
               what=f"both sinks equal the table (seed {seed})")
    return harness


def test_sinks_converge_to_the_table_through_the_view(
        make_harness: MakeHarness, search: OpenSearch, cache: redis.Redis, unique_name: str,
        opensearch_url: str, redis_url: str) -> None:
    seed = random.randrange(1 << 30)
    harness = run_workload_to_convergence(make_harness, search, cache, unique_name,
                                          opensearch_url, redis_url, seed)
    events = harness.messages(harness.topic("items"))
    assert any(b'"unchanged":["body"]' in m.value for m in events), (
        "updates left the TOASTed body out")
    assert any(b'"op":"t"' in m.value for m in events), "the truncate was captured"
    # a new change after the truncate and the replays still lands in both sinks (on a row
    # inside the view's filter: re-entering it without the body is the known gap below)
    harness.execute("UPDATE items SET qty = 1, title = 'last' WHERE (tenant, id) IN "
                    "(SELECT tenant, id FROM items WHERE qty < 90 ORDER BY tenant, id LIMIT 1)")
    wait_until(lambda: converged(harness, search, cache, unique_name), timeout=30,
               what="the last update reaches both sinks")


def test_replay_from_earliest_is_idempotent_and_never_goes_back(
        make_harness: MakeHarness, search: OpenSearch, cache: redis.Redis, unique_name: str,
        opensearch_url: str, redis_url: str) -> None:
    seed = random.randrange(1 << 30)
    harness = run_workload_to_convergence(make_harness, search, cache, unique_name,
                                          opensearch_url, redis_url, seed)
    topic = harness.topic("items")
    for runner in harness.runners:
        wait_until(partial(harness.caught_up, runner.group, topic), timeout=30,
                   what=f"{runner.group} committed everything")
        harness.stop_connector(runner)
    alias = f"{unique_name}_items"
    before = Sinks(items.search_state(search, alias), items.cache_state(cache, unique_name),
                   items.cache_versions(cache, unique_name))
    rng = random.Random(seed)
    # a replay can outrun the sampling; replay again (each a whole check of its own) until
    # samples fell inside one at least twice
    during_replay = 0
    for _ in range(6):
        during_replay += replay_from_earliest(harness, search, cache, unique_name, before, rng)
        if during_replay >= 2:
            break
    assert during_replay >= 2, "sampled while the search connector replayed"


@dataclass(frozen=True)
class Sinks:
    """What the index and the cache held when the workload had converged."""

    search: dict[items.Key, tuple[int, items.Record]]
    cache: dict[items.Key, items.Record]
    versions: dict[bytes, int]


def replay_from_earliest(harness: PipelineHarness, search: OpenSearch, cache: redis.Redis,
                         name: str, before: Sinks, rng: random.Random) -> int:
    """Rewind both groups, replay with random batch sizes while checking that no document
    or cache entry goes back; check the end state equals ``before``. The number of samples
    taken while the search connector was still replaying."""
    topic, alias = harness.topic("items"), f"{name}_items"
    total = harness.end_offsets(topic)
    read_before = {group: harness.counter("messages_read", group)
                   for group in ("search", "cache")}
    assert harness.rewind_group("search") > 0 and harness.rewind_group("cache") > 0
    replays = [harness.start_connector("search", batch_size=rng.randint(1, 5)),
               harness.start_connector("cache", batch_size=rng.randint(1, 5))]
    last_search = {key: version for key, (version, _) in before.search.items()}
    last_versions = dict(before.versions)
    samples = during_replay = 0
    while not all(harness.caught_up(r.group, topic) for r in replays) or samples < 3:
        samples += 1
        during_replay += not harness.caught_up("search", topic)
        now_search = items.search_state(search, alias)
        assert now_search.keys() == before.search.keys(), "a document came back or vanished"
        for key, (version, _) in now_search.items():
            assert version >= last_search[key], f"document {key} went back"
            last_search[key] = version
        for cache_key, stored in items.cache_versions(cache, name).items():
            assert stored >= last_versions.get(cache_key, 0), f"{cache_key!r} went back"
            last_versions[cache_key] = stored
        assert items.cache_state(cache, name).keys() == before.cache.keys()
        assert samples < 400, "the replay did not finish"
    for runner in replays:
        harness.stop_connector(runner)
        read = harness.counter("messages_read", runner.group) - read_before[runner.group]
        assert read >= total, f"{runner.group} replayed {read} of {total} events"
    assert items.search_state(search, alias) == before.search
    assert items.cache_state(cache, name) == before.cache
    assert items.cache_versions(cache, name) == before.versions
    return during_replay


@pytest.mark.xfail(strict=True, reason="known gap: a row re-entering a view's filter by an "
                   "update that leaves its TOASTed body unchanged is written without the body "
                   "(PostgreSQL does not resend it; the sink has no stored record)")
def test_filter_reentry_loses_unchanged_toast(
        make_harness: MakeHarness, search: OpenSearch, cache: redis.Redis, unique_name: str,
        opensearch_url: str, redis_url: str) -> None:
    harness = make_harness(items.SCHEMA, items.connectors_yaml(unique_name, opensearch_url,
                                                               redis_url))
    harness.start_capture()
    harness.start_connector("search")
    harness.start_connector("cache")
    harness.execute("INSERT INTO items VALUES (1, 1, 'a', 95, repeat('x', 5000))")
    topic = harness.topic("items")
    wait_until(lambda: harness.end_offsets(topic) == 1 and harness.caught_up("search", topic)
               and harness.caught_up("cache", topic), timeout=30,
               what="both sinks saw the filtered-out insert")
    harness.execute("UPDATE items SET qty = 5 WHERE tenant = 1 AND id = 1")
    wait_until(lambda: (1, 1) in items.cache_state(cache, unique_name)
               and (1, 1) in items.records(items.search_state(search, f"{unique_name}_items")),
               timeout=30, what="the row re-entered the view in both sinks")
    want = items.expected(harness)
    assert items.cache_state(cache, unique_name) == want
    assert items.records(items.search_state(search, f"{unique_name}_items")) == want
