"""Servers that do not answer at start-up: each command says which one (host and port,
and the config field), keeps retrying where a service should, and never shows a
password."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from compose.launcher.base import free_port
from tests.integration.security.cli import cdc_until

pytestmark = pytest.mark.integration

PASSWORD = "pw-never-shown-4711"


def write_pipeline(tmp_path: Path, pg: int, redis: int, opensearch: int) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(f"""
source:
  dsn: postgresql://app:{PASSWORD}@127.0.0.1:{pg}/app
  slot: s1
  publication: p1
log:
  backend: file
  path: {tmp_path / 'log'}
connectors:
  - name: cache
    type: redis
    topics: [s1.public.orders]
    config:
      url: redis://:{PASSWORD}@127.0.0.1:{redis}/0
  - name: search
    type: opensearch
    topics: [s1.public.orders]
    config:
      hosts: [http://127.0.0.1:{opensearch}]
""")
    return path


def retried(args: list[str], *messages: str) -> str:
    """Run ``cdc ARGS`` until it printed each of ``messages`` twice (it retried rather than
    exited), then SIGTERM it; its output."""
    return cdc_until(lambda printed: all(printed.count(m) >= 2 for m in messages),
                     f"a retry after {messages}", *args).output


def test_unreachable_servers_are_named_at_start_up(tmp_path: Path) -> None:
    pg, redis, opensearch = free_port(), free_port(), free_port()
    config = str(write_pipeline(tmp_path, pg, redis, opensearch))

    capture = retried(["capture", "-c", config],
                      f"cannot start: PostgreSQL at 127.0.0.1:{pg}/app (source.dsn) failed")
    assert "Connection refused" in capture

    connect = retried(["connect", "-c", config],
                      f"Redis failed while connecting to 127.0.0.1:{redis} (config.url)",
                      f"OpenSearch did not answer while connecting to 127.0.0.1:{opensearch} "
                      "(config.hosts)")

    doctor = subprocess.run([sys.executable, "-m", "cdc.cli", "doctor", "-c", config],
                            capture_output=True, text=True, timeout=60, check=False)
    assert doctor.returncode != 0
    assert "cannot check the database" in doctor.stderr
    assert f"port {pg} failed: Connection refused" in doctor.stderr

    for output in (capture, connect, doctor.stdout + doctor.stderr):
        assert PASSWORD not in output
