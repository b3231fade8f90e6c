"""Every type family through ``cdc run`` into real OpenSearch and Redis: each row is in the
index with ``_source`` equal to the event's ``after``, and in the cache with the same
value; nothing is dead-lettered. Values a field cannot index (NaN in a ``double``, a JSON
scalar in a ``flat_object``) keep their document and are reported."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from typing import Any

import orjson
import psycopg
import redis
from opensearchpy import OpenSearch

from cdc.config.models import dead_letter_topic
from cdc.log.file import FileLog
from tests.processes import stop_or_fail

from . import oracle as o
from .catalogue import columns, row_count
from .conftest import MakeScenario
from .scenario import Scenario, create_table, fill, replayed, server_major


def _connectors(scenario: Scenario, opensearch_url: str, redis_url: str) -> str:
    topic = f"{scenario.name}.public.every_type"
    return f"""connectors:
  - name: search
    type: opensearch
    topics: [{topic}]
    batch_timeout: 100ms
    config:
      hosts: [{opensearch_url}]
      index: "{scenario.name}_{{table}}"
  - name: cache
    type: redis
    topics: [{topic}]
    batch_timeout: 100ms
    config:
      url: {redis_url}
      key_template: "{scenario.name}:{{table}}:{{key}}"
      value_format: json
"""


def _search_sources(client: OpenSearch, index: str) -> dict[int, dict[str, Any]]:
    if not client.indices.exists(index=index):
        return {}
    client.indices.refresh(index=index)
    hits = client.search(index=index, body={"query": {"match_all": {}}, "size": 1000})
    return {int(hit["_id"]): hit["_source"] for hit in hits["hits"]["hits"]}


def _cache_values(client: redis.Redis, prefix: str) -> dict[int, dict[str, Any]]:
    found = {}
    for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        value: Any = client.get(key)
        if value is not None:
            found[int(key.decode().rsplit(":", 1)[1])] = orjson.loads(value)
    return found


def _wait_started(scenario: Scenario, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        with psycopg.connect(scenario.dsn) as conn:
            if conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s AND "
                            "active", (scenario.name,)).fetchone():
                return
        assert proc.poll() is None, "cdc run stopped while starting"
        assert time.monotonic() < deadline, "cdc run did not start streaming"
        time.sleep(0.2)


def test_every_type_reaches_opensearch_and_redis(make_scenario: MakeScenario,
                                                  opensearch_url: str, redis_url: str) -> None:
    scenario = make_scenario()
    cols = columns(server_major=server_major(scenario.dsn))
    rows = row_count(cols)
    table = create_table(scenario, "public", "every_type", cols)
    ids = itertools.count(1)
    fill(scenario, table, cols, ids, rows)  # snapshot
    config = scenario.write_config(_connectors(scenario, opensearch_url, redis_url))
    stderr_path = scenario.workdir / "stderr.txt"
    search, cache = OpenSearch([opensearch_url]), redis.Redis.from_url(redis_url)
    index, prefix = f"{scenario.name}_every_type", f"{scenario.name}:every_type"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c", str(config)],
                                stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        _wait_started(scenario, proc)
        fill(scenario, table, cols, ids, rows)  # stream
        deadline = time.monotonic() + 90
        while True:
            found_search, found_cache = _search_sources(search, index), _cache_values(cache,
                                                                                     prefix)
            if len(found_search) == len(found_cache) == 2 * rows:
                break
            dead = _dead_letters(scenario)
            assert not dead, f"dead-lettered: {dead[:3]}"
            assert proc.poll() is None, stderr_path.read_text()[-3000:]
            assert time.monotonic() < deadline, (
                f"{len(found_search)} documents, {len(found_cache)} cache values of "
                f"{2 * rows} rows")
            time.sleep(0.5)
    finally:
        stop_or_fail(proc)
        for key in cache.scan_iter(match=f"{prefix}:*"):
            cache.delete(key)
        cache.close()
    assert not _dead_letters(scenario), "nothing is dead-lettered"
    events = replayed(scenario.events("public", "every_type"), "id")
    problems = [f"opensearch row {k} column {c}: event {v!r}, _source {found_search[k].get(c)!r}"
                for k, row in events.items() for c, v in row.items()
                if not o.equal(v, found_search[k].get(c, "<absent>"))]
    problems += [f"redis row {k} column {c}: event {v!r}, cache {found_cache[k].get(c)!r}"
                 for k, row in events.items() for c, v in row.items()
                 if not o.equal(v, found_cache[k].get(c, "<absent>"))]
    assert not problems, "\n".join(problems)
    (mapping,) = search.indices.get_mapping(index=index).values()
    properties = mapping["mappings"]["properties"]
    assert properties["ad"]["properties"]["zip"]["type"] == "long", "typed by its attributes"
    assert properties["ad"]["properties"]["at"]["type"] == "date"
    assert properties["ir"]["properties"]["lower"]["type"] == "long"
    assert properties["tzr"]["properties"]["upper"]["type"] == "date"
    assert properties["fr"]["properties"]["lower"]["type"] == "double"
    assert properties["jb"]["type"] == "flat_object"
    warnings = stderr_path.read_text()
    assert "f8 cannot be indexed" in warnings, "a NaN in a double is reported"
    search.indices.delete(index=f"{index}-*", ignore_unavailable=True)


def _dead_letters(scenario: Scenario) -> list[bytes]:
    event_log = FileLog(scenario.log_dir)
    try:
        letters = []
        for connector in ("search", "cache"):
            topic = dead_letter_topic(scenario.name, connector)
            if topic in event_log.admin().topics():
                letters += [m.value for m in event_log.read_to_end(topic)]
        return letters
    finally:
        event_log.close()
