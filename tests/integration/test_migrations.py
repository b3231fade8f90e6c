"""Migrations reach derived systems: after an ``ALTER TABLE`` that changes rows without
writing them, ``cdc run`` reads the table again, so the log folds to the table and the
index and the cache (JSON and hashes) equal it — ``cdc reconcile`` clean — and a dropped
column's values are gone from every document, value and hash, on the file log and on
Kafka.

Each table holds ``ROWS`` rows written before its migration; a few are updated after
it (which brings the new Relation message); the others change only through the re-read.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
import redis
from opensearchpy import OpenSearch
from psycopg import sql

from cdc.config import load_config
from cdc.log.open import open_log
from tests.processes import start_cdc_run, stop_process

ROWS = 200
TABLES = ("fast_default", "retyped", "dropped", "volatile_default")
MIGRATIONS = {
    "fast_default": "ALTER TABLE fast_default ADD COLUMN flag boolean NOT NULL DEFAULT true",
    "retyped": "ALTER TABLE retyped ALTER COLUMN v TYPE text USING (v * 2)::text",
    "dropped": "ALTER TABLE dropped DROP COLUMN note",
    "volatile_default": "ALTER TABLE volatile_default ADD COLUMN created timestamptz "
                        "NOT NULL DEFAULT clock_timestamp()",
}
SUMMARY = re.compile(r"reconcile: tables=(\d+) rows=(\d+) missing=(\d+) extra=(\d+) "
                     r"different=(\d+)")


def pipeline_yaml(backend: str, dsn: str, name: str, log_dir: Path, kafka: str,
                  opensearch_url: str, redis_url: str, schema_changes: str = "resnapshot") -> str:
    log = (f"  backend: kafka\n  bootstrap_servers: [{kafka}]\n" if backend == "kafka"
           else f"  backend: file\n  path: {log_dir}\n")
    topics = ", ".join(f"{name}.public.{t}" for t in TABLES)
    return f"""
source:
  dsn: {dsn}
  slot: {name}
  publication: {name}
  tables: [{", ".join(f"public.{t}" for t in TABLES)}]
  heartbeat_interval: 1s
  schema_changes: {{default: {schema_changes}}}
log:
{log}  partitions: 3
connectors:
  - name: {name}_search
    type: opensearch
    topics: [{topics}]
    batch_timeout: 100ms
    config:
      hosts: [{opensearch_url}]
      index: "{name}_{{table}}"
  - name: {name}_json
    type: redis
    topics: [{topics}]
    batch_timeout: 100ms
    config:
      url: {redis_url}
      key_template: "{name}:json:{{table}}:{{key}}"
  - name: {name}_hash
    type: redis
    topics: [{topics}]
    batch_timeout: 100ms
    config:
      url: {redis_url}
      key_template: "{name}:hash:{{table}}:{{key}}"
      value_format: hash
"""


@pytest.fixture
def clients(opensearch_url: str, redis_url: str,
            unique_name: str) -> Iterator[tuple[OpenSearch, redis.Redis]]:
    search, cache = OpenSearch([opensearch_url]), redis.Redis.from_url(redis_url)
    yield search, cache
    for key in cache.scan_iter(match=f"{unique_name}:*", count=1000):
        cache.delete(key)
    search.indices.delete(index=f"{unique_name}*", expand_wildcards="all",
                          ignore_unavailable=True)
    cache.close()
    search.close()


def reconcile(config: Path, *options: str) -> tuple[int, ...]:
    """``cdc reconcile``'s summary: tables, rows, missing, extra, different."""
    return summary(reconcile_output(config, *options))


def reconcile_output(config: Path, *options: str) -> str:
    """What ``cdc reconcile`` printed (its report lines and summary)."""
    done = subprocess.run([sys.executable, "-m", "cdc.cli", "reconcile", "-c", str(config),
                           "--timeout", "60", *options], capture_output=True, text=True,
                          timeout=300)
    assert SUMMARY.search(done.stdout), (done.returncode, done.stdout[-2000:],
                                         done.stderr[-2000:])
    return done.stdout


def summary(output: str) -> tuple[int, ...]:
    match = SUMMARY.search(output)
    assert match is not None, output[-2000:]
    return tuple(int(g) for g in match.groups())


def wait_until(check: Any, what: str, process: subprocess.Popen[bytes], stderr: Path,
               timeout: float = 180, seen: list[str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert process.poll() is None, stderr.read_text()[-3000:]
        assert time.monotonic() < deadline, (what, (seen or [""])[-1][-3000:])
        time.sleep(0.5)


def create_tables(dsn: str) -> None:
    """Every table of ``TABLES`` with ``ROWS`` rows written before any migration."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in TABLES:
            conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, v int, note text)")
                         .format(sql.Identifier(table)))
            conn.execute(sql.SQL("INSERT INTO {} SELECT g, g, 'secret ' || g "
                                 "FROM generate_series(1, %s) g").format(sql.Identifier(table)),
                         (ROWS,))


def migrate(dsn: str) -> None:
    """Each table's migration, then an update of its first rows (which brings pgoutput's
    new Relation message)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in TABLES:
            conn.execute(MIGRATIONS[table].encode())
            conn.execute(sql.SQL("UPDATE {} SET v = v WHERE id <= 3")
                         .format(sql.Identifier(table)))


def folded(config: Path, table: str) -> dict[int, dict[str, Any]]:
    """The table's topic folded to the newest event per key (deletes and truncates
    remove): what a replay of the log holds, timestamps as present/absent."""
    pipeline = load_config(config)
    event_log = open_log(pipeline.log)
    try:
        messages = sorted(event_log.read_to_end(pipeline.topic_for("public", table)),
                          key=lambda m: m.position)
    finally:
        event_log.close()
    rows: dict[int, dict[str, Any]] = {}
    for message in messages:
        event = orjson.loads(message.value)
        if event["op"] == "t":
            rows.clear()
        elif event["op"] == "d":
            rows.pop(event["key"]["id"], None)
        else:
            rows[event["key"]["id"]] = _comparable(event["after"])
    return rows


def table_rows(conn: psycopg.Connection[Any], table: str) -> dict[int, dict[str, Any]]:
    """The table as the log should fold to (``folded``'s shape)."""
    found = conn.execute(sql.SQL("SELECT row_to_json(t) FROM {} t")
                         .format(sql.Identifier(table))).fetchall()
    return {row[0]["id"]: _comparable(row[0]) for row in found}


def _comparable(values: dict[str, Any]) -> dict[str, Any]:
    return {key: (value is not None) if key == "created" else value
            for key, value in values.items()}


def redis_count(cache: redis.Redis, pattern: str) -> int:
    return sum(1 for _ in cache.scan_iter(match=pattern, count=1000))


def fields_anywhere(search: OpenSearch, cache: redis.Redis, name: str, table: str,
                    field: str) -> int:
    """How many documents, JSON values and hashes of ``table`` still hold ``field``."""
    index = f"{name}_{table}"
    search.indices.refresh(index=index)
    found = search.count(index=index, body={"query": {"exists": {"field": field}}})["count"]
    for key in cache.scan_iter(match=f"{name}:json:{table}:*", count=1000):
        value: Any = cache.get(key)
        found += value is not None and field in orjson.loads(value)
    for key in cache.scan_iter(match=f"{name}:hash:{table}:*", count=1000):
        found += bool(cache.hexists(key, field))
    return int(found)


@pytest.mark.parametrize("backend", ["file", "kafka"])
def test_every_migration_reaches_the_index_and_the_cache(
        backend: str, fresh_database: str, unique_name: str, tmp_path: Path,
        clients: tuple[OpenSearch, redis.Redis], opensearch_url: str, redis_url: str,
        request: pytest.FixtureRequest) -> None:
    kafka = request.getfixturevalue("kafka_bootstrap") if backend == "kafka" else ""
    search, cache = clients
    name = unique_name
    create_tables(fresh_database)
    config = tmp_path / "pipeline.yaml"
    config.write_text(pipeline_yaml(backend, fresh_database, name, tmp_path / "log", kafka,
                                    opensearch_url, redis_url))
    stderr = tmp_path / "stderr.log"
    process = start_cdc_run(config, stderr)
    try:
        every_row = len(TABLES) * ROWS
        wait_until(lambda: redis_count(cache, f"{name}:hash:*") >= every_row,
                   "the snapshot did not reach Redis", process, stderr)
        migrate(fresh_database)
        wait_until(lambda: reconcile(config)[2:] == (0, 0, 0),
                   "the index and the cache never equalled the tables", process, stderr)
        tables, rows, *drift = reconcile(config)
        assert tables >= len(TABLES) and rows >= every_row and drift == [0, 0, 0]
        assert fields_anywhere(search, cache, name, "dropped", "note") == 0
        index = f"{name}_fast_default"
        flagged = search.count(index=index, body={"query": {"term": {"flag": True}}})
        assert flagged["count"] == ROWS, "every row holds the new column's default"
        value: Any = cache.get(f"{name}:json:retyped:150")
        assert orjson.loads(value)["v"] == "300", "the USING expression's value"
        assert cache.hget(f"{name}:hash:volatile_default:150", "created") is not None
        with psycopg.connect(fresh_database, autocommit=True) as conn:
            for table in TABLES:
                assert folded(config, table) == table_rows(conn, table), table
    finally:
        stop_process(process)
    log_text = stderr.read_text()
    for table in TABLES:
        assert f"public.{table}: a schema change" in log_text, table


def test_reconcile_names_a_schema_change_as_the_cause_and_repair_fixes_it(
        fresh_database: str, unique_name: str, tmp_path: Path,
        clients: tuple[OpenSearch, redis.Redis], opensearch_url: str, redis_url: str) -> None:
    """With ``schema_changes: ignore`` the migrated rows stay as they were downstream:
    ``cdc reconcile`` reports each of them with the schema change as its cause (the rows
    written after it, without), and ``--repair`` brings the sinks back to the table."""
    search, cache = clients
    name = unique_name
    create_tables(fresh_database)
    config = tmp_path / "pipeline.yaml"
    config.write_text(pipeline_yaml("file", fresh_database, name, tmp_path / "log", "",
                                    opensearch_url, redis_url, schema_changes="ignore"))
    stderr = tmp_path / "stderr.log"
    process = start_cdc_run(config, stderr)
    try:
        wait_until(lambda: redis_count(cache, f"{name}:hash:*") >= len(TABLES) * ROWS,
                   "the snapshot did not reach Redis", process, stderr)
        migrate(fresh_database)
        stale = (ROWS - 3) * len(TABLES) * 3  # rows not written since, in three sinks
        seen: list[str] = []

        def found_stale() -> bool:
            seen.append(reconcile_output(config))
            return summary(seen[-1])[2] == 0 and summary(seen[-1])[4] >= stale

        wait_until(found_stale, "the migrated rows were not found different", process,
                   stderr, timeout=120, seen=seen)
        report = seen[-1].splitlines()
        different = [line for line in report if line.startswith("different ")]
        caused = [line for line in different
                  if "cause: schema changed since the row was written" in line]
        assert len(caused) == len(different) == stale, [
            line for line in different if line not in caused][:8]
        assert any(" public.dropped " in line and "note: not in the table's record" in line
                   for line in caused)
        repaired = reconcile_output(config, "--repair")
        assert "repair: requested an incremental snapshot" in repaired, repaired[-2000:]
        wait_until(lambda: reconcile(config)[2:] == (0, 0, 0),
                   "--repair did not bring the sinks back to the tables", process, stderr)
        assert fields_anywhere(search, cache, name, "dropped", "note") == 0
    finally:
        stop_process(process)
