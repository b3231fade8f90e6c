"""``cdc run`` supervises its children: a child killed with SIGKILL is started again,
counted on /metrics and named on /healthz meanwhile, and no event is lost; SIGTERM stops
every child cleanly and leaves no process behind.

One real pipeline (PostgreSQL → file log → Redis connector) in its own processes.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from .pipeline_process import Pipeline, running_pipeline, wait_until_ready


@pytest.fixture
def pipeline(postgres_dsn: str, redis_url: str, tmp_path: Path) -> Iterator[Pipeline]:
    name = f"t_{uuid.uuid4().hex[:10]}"
    with running_pipeline(postgres_dsn, name, redis_url, tmp_path) as running:
        wait_until_ready(running)
        yield running


def processes_with(text: str) -> dict[int, str]:
    """pid → command line of the live processes whose command line contains ``text``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = next(row for row in (entry / "status").read_text().splitlines()
                         if row.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if text in line and "zombie" not in state:
            found[int(entry.name)] = line
    return found


def child_pid(pipeline: Pipeline, command: str) -> int:
    """The pid of the supervisor's child running ``cdc <command>``."""
    config = str(pipeline.stderr.parent / "pipeline.yaml")
    pids = [pid for pid, line in processes_with(config).items()
            if pid != pipeline.process.pid and f"cdc.supervisor.child --log-format json "
            f"{command} " in line]
    assert len(pids) == 1, processes_with(config)
    return pids[0]


def redis_rows(url: str, name: str) -> dict[int, str]:
    client = redis.Redis.from_url(url)
    found = {}
    for key in client.scan_iter(match=f"{name}:customers:*"):
        value: Any = client.get(key)
        if value is not None:
            row = json.loads(value)
            found[int(row["id"])] = row["name"]
    return found


def table_rows(pipeline: Pipeline) -> dict[int, str]:
    with psycopg.connect(pipeline.database) as conn:
        return {int(key): str(name) for key, name
                in conn.execute("SELECT id, name FROM customers").fetchall()}


def kill_and_watch(pipeline: Pipeline, command: str) -> list[str]:
    """SIGKILL the child running ``cdc command``; poll /healthz until it is ready again;
    the reasons it gave while not ready."""
    old = child_pid(pipeline, command)
    os.kill(old, signal.SIGKILL)
    reasons: list[str] = []
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, reasons
        assert pipeline.process.poll() is None, pipeline.stderr.read_text()[-3000:]
        status, body = pipeline.get("/healthz")
        if status == 503:
            reasons += json.loads(body)["reasons"]
        elif status == 200 and reasons:
            return reasons
        time.sleep(0.1)


def test_a_killed_child_is_restarted_and_nothing_is_lost(pipeline: Pipeline,
                                                         redis_url: str) -> None:
    pipeline.write(100, start=0)
    reasons = kill_and_watch(pipeline, "connect")
    assert any(reason.startswith("connector cache: the process is down (killed by signal 9")
               for reason in reasons), reasons
    pipeline.write(100, start=100)
    reasons = kill_and_watch(pipeline, "capture")
    assert any(reason.startswith("capture: the process is down (killed by signal 9")
               for reason in reasons), reasons
    pipeline.write(100, start=200)
    assert pipeline.metric("distributary_child_restarts_total", child="capture") == 1
    assert pipeline.metric("distributary_child_restarts_total", child="connector cache") == 1
    assert pipeline.metric("distributary_child_up", child="capture") == 1
    assert pipeline.metric("distributary_ready") == 1
    want = table_rows(pipeline)
    assert len(want) == 300
    deadline = time.monotonic() + 60
    while (got := redis_rows(redis_url, pipeline.name)) != want:
        assert time.monotonic() < deadline, f"{len(got)}/{len(want)} rows in Redis"
        time.sleep(0.3)


def test_sigterm_stops_every_child_cleanly(pipeline: Pipeline) -> None:
    config = str(pipeline.stderr.parent / "pipeline.yaml")
    children = set(processes_with(config)) - {pipeline.process.pid}
    assert len(children) == 2, processes_with(config)  # the capture and one connector
    pipeline.process.send_signal(signal.SIGTERM)
    assert pipeline.process.wait(timeout=60) == 0, pipeline.stderr.read_text()[-3000:]
    assert processes_with(config) == {}
    records = [json.loads(line) for line in pipeline.stderr.read_text().splitlines()
               if line.strip()]
    assert not [r for r in records if "stopped with status" in r["message"]
                or "killing it" in r["message"]]
