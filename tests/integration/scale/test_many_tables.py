"""``cdc run`` over 1,000 tables selected by a pattern, with a Redis connector reading them
through ``topic_pattern``, under ``ulimit -n 1024``: every table's snapshot row and one
streamed row per table reach Redis (issue: open files must not grow with the schema)."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

import psycopg
import redis
from psycopg import sql

from tests.processes import stop_process

TABLES = 1000
OPEN_FILES = 1024
CREATE_TABLES = sql.SQL("""
DO $$ DECLARE name text; BEGIN
  FOR i IN 0 .. {last} LOOP
    name := 'item_' || lpad(i::text, 4, '0');
    EXECUTE format('CREATE TABLE %I (id int PRIMARY KEY, v text)', name);
    EXECUTE format('INSERT INTO %I VALUES (1, %L)', name, 'snap');
  END LOOP;
  CREATE TABLE other (id int PRIMARY KEY);
  INSERT INTO other VALUES (1);
END $$""").format(last=sql.Literal(TABLES - 1))
INSERT_ONE_EACH = sql.SQL("""
DO $$ BEGIN
  FOR i IN 0 .. {last} LOOP
    EXECUTE format('INSERT INTO %I VALUES (2, %L)', 'item_' || lpad(i::text, 4, '0'), 'stream');
  END LOOP;
  INSERT INTO other VALUES (2);
END $$""").format(last=sql.Literal(TABLES - 1))


def write_config(path: Path, dsn: str, name: str, redis_url: str) -> None:
    path.write_text(f"""
source:
  dsn: {dsn}
  slot: {name}
  publication: {name}
  tables: ['public.item_*']
log:
  backend: file
  path: {path.parent / 'log'}
connectors:
  - name: cache
    type: redis
    topic_pattern: '{name}\\.public\\.item_.*'
    batch_timeout: 100ms
    config:
      url: {redis_url}
      key_template: "{name}:{{table}}:{{key}}"
      value_format: json
""")


def limit_open_files() -> None:
    """In the child: at most ``OPEN_FILES`` descriptors, hard limit included."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


def wait_for_values(cache: redis.Redis, keys: list[str], value: str,
                    proc: subprocess.Popen[bytes], stderr: Path, timeout_s: float) -> None:
    """Until every key holds a row whose ``v`` is ``value``; fail naming what is missing."""
    deadline = time.monotonic() + timeout_s
    while True:
        values = cast(list[bytes | None], cache.mget(keys))
        missing = [k for k, v in zip(keys, values, strict=True)
                   if v is None or f'"v":"{value}"' not in v.decode()]
        if not missing:
            return
        assert proc.poll() is None, f"cdc run exited: {stderr.read_text()[-3000:]}"
        assert time.monotonic() < deadline, (
            f"{len(missing)} of {len(keys)} rows missing in Redis, e.g. {missing[:3]}; "
            f"cdc run said: {stderr.read_text()[-2000:]}")
        time.sleep(0.5)


def test_cdc_run_over_a_thousand_tables_under_ulimit_1024(
        fresh_database: str, unique_name: str, tmp_path: Path, redis_url: str) -> None:
    with psycopg.connect(fresh_database) as conn:  # one transaction
        conn.execute(CREATE_TABLES)
    config = tmp_path / "pipeline.yaml"
    write_config(config, fresh_database, unique_name, redis_url)
    stderr = tmp_path / "stderr.log"
    with stderr.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c", str(config)],
                                stdout=subprocess.DEVNULL, stderr=err,
                                preexec_fn=limit_open_files)
    cache = redis.Redis.from_url(redis_url)
    tables = [f"item_{i:04d}" for i in range(TABLES)]
    try:
        wait_for_values(cache, [f"{unique_name}:{t}:1" for t in tables], "snap", proc,
                        stderr, timeout_s=240)
        with psycopg.connect(fresh_database) as conn:
            conn.execute(INSERT_ONE_EACH)
        wait_for_values(cache, [f"{unique_name}:{t}:2" for t in tables], "stream", proc,
                        stderr, timeout_s=120)
        assert cache.get(f"{unique_name}:other:1") is None  # not selected by the pattern
        assert proc.poll() is None, stderr.read_text()[-3000:]
    finally:
        stop_process(proc)
        for key in cache.scan_iter(match=f"{unique_name}:*", count=1000):
            cache.delete(key)
    assert proc.returncode == 0, stderr.read_text()[-3000:]
