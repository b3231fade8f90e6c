"""A real ``cdc run`` with a ``metrics:`` section, for the observability tests."""

from __future__ import annotations

import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from compose.launcher.base import free_port
from tests.processes import start_cdc_run, stop_process

TOKEN = "obs-token-4d8f1c2a9e"


@dataclass
class Pipeline:
    """The running ``cdc run`` and how to reach it."""

    process: subprocess.Popen[bytes]
    port: int
    name: str
    database: str
    stderr: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str, token: str | None = TOKEN) -> tuple[int, str]:
        """Status and body of a GET (errors included)."""
        request = urllib.request.Request(self.base + path)
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()

    def metric(self, name: str, **labels: str) -> float | None:
        """The value of one series of ``/metrics`` (None when absent)."""
        status, text = self.get("/metrics")
        assert status == 200, text
        for line in text.splitlines():
            match = re.fullmatch(r"([a-zA-Z_:][\w:]*)(\{.*\})? (\S+)", line)
            if match is None or match.group(1) != name:
                continue
            found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
            if all(found.get(key) == value for key, value in labels.items()):
                return float(match.group(3))
        return None

    def write(self, rows: int, start: int = 0) -> None:
        """Insert ``rows`` customers in small transactions, then update them."""
        with psycopg.connect(self.database, autocommit=True) as conn:
            for first in range(start, start + rows, 10):
                with conn.transaction():
                    for key in range(first, min(first + 10, start + rows)):
                        conn.execute("INSERT INTO customers VALUES (%s, %s)", (key, f"c{key}"))
            conn.execute("UPDATE customers SET name = name || '!' WHERE id >= %s AND id < %s",
                         (start, start + rows))  # not the rows of an earlier write


def write_config(path: Path, dsn: str, name: str, redis_url: str, port: int) -> None:
    path.write_text(f"""
source:
  dsn: {dsn}
  slot: {name}
  publication: {name}
  tables: [public.customers]
log:
  backend: file
  path: {path.parent / 'log'}
connectors:
  - name: cache
    type: redis
    topics: [{name}.public.customers]
    batch_timeout: 100ms
    config:
      url: {redis_url}
      key_template: "{name}:{{table}}:{{key}}"
      value_format: json
metrics:
  port: {port}
  token_file: {path.parent / 'token'}
  sample_interval: 500ms
""")
    (path.parent / "token").write_text(TOKEN + "\n")


@contextmanager
def running_pipeline(admin_dsn: str, name: str, redis_url: str, workdir: Path
                     ) -> Iterator[Pipeline]:
    """A new database with ``customers``, and ``cdc run`` on it; all removed afterwards."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    database = admin_dsn.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text)")
    config, port = workdir / "pipeline.yaml", free_port()
    write_config(config, database, name, redis_url, port)
    stderr = workdir / "stderr.log"
    process = start_cdc_run(config, stderr)
    try:
        yield Pipeline(process, port, name, database, stderr)
    finally:
        stop_process(process)
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                         " WHERE slot_name = %s AND NOT active", (name,))
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                         .format(sql.Identifier(name)))


def wait_until_ready(pipeline: Pipeline, timeout_s: float = 60) -> dict[str, object]:
    """Poll ``/healthz`` until it answers 200; fail with its last answer."""
    import json

    deadline = time.monotonic() + timeout_s
    status, body = 0, ""
    while time.monotonic() < deadline:
        assert pipeline.process.poll() is None, pipeline.stderr.read_text()
        try:
            status, body = pipeline.get("/healthz")
        except OSError as exc:  # not listening yet
            status, body = 0, str(exc)
        if status == 200:
            result: dict[str, object] = json.loads(body)
            return result
        time.sleep(0.2)
    raise AssertionError(f"/healthz never became ready: {status} {body}")
