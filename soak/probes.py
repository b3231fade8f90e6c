"""What the soak samples: the pipeline's processes (from ``/proc``), the end-to-end lag
to each sink (the clock row as Redis and OpenSearch hold it), the pipeline's own metrics,
the WAL the slot retains and the log's bytes on disk."""

from __future__ import annotations

import contextlib
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import orjson
import psycopg
import redis
from opensearchpy import OpenSearch
from prometheus_client.parser import text_string_to_metric_families

MB_PER_KB = 1 / 1024  # /proc/<pid>/status gives kB
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True, slots=True)
class ProcessStats:
    """One process at one moment."""

    rss_mb: float
    fds: int
    threads: int


def process_stats(pid: int) -> ProcessStats | None:
    """RSS, open files and threads of ``pid``; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss_kb = int(fields.get("VmRSS", "0 kB").split()[0])
    return ProcessStats(rss_kb * MB_PER_KB, fds, int(fields["Threads"]))


def pipeline_processes(run_pid: int) -> dict[str, int]:
    """``cdc run``'s processes by role: ``supervisor``, ``capture`` and each connector by
    its name (the children are found by their parent and told apart by their arguments)."""
    roles = {"supervisor": run_pid}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent != run_pid:
                continue
            args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if b"--connector" in args:
                roles[args[args.index(b"--connector") + 1].decode()] = int(entry)
            elif b"capture" in args:
                roles["capture"] = int(entry)
    return roles


class ClockProbe:
    """The writer's clock (``at_us``) as each sink holds it (None while the sink does not
    answer)."""

    def __init__(self, redis_url: str, redis_key: str, opensearch_url: str,
                 index: str) -> None:
        self._redis = redis.Redis.from_url(redis_url, socket_timeout=2,
                                           socket_connect_timeout=2)
        self._redis_key = redis_key
        self._search = OpenSearch([opensearch_url], timeout=2, max_retries=0)
        self._index = index

    def redis_clock(self) -> int | None:
        with contextlib.suppress(redis.RedisError):
            value: bytes | None = self._redis.get(self._redis_key)  # type: ignore[assignment]
            if value is not None:
                return int(orjson.loads(value)["at_us"])
        return None

    def opensearch_clock(self) -> int | None:
        with contextlib.suppress(Exception):  # down, restarting, index not there yet
            document = self._search.get(index=self._index, id="1", realtime=True)
            return int(document["_source"]["at_us"])
        return None

    def close(self) -> None:
        self._redis.close()
        self._search.close()


@dataclass(frozen=True, slots=True)
class PipelineMetrics:
    """From ``cdc run``'s ``/metrics``: the capture's lag and each connector's events
    behind."""

    capture_lag_s: float | None
    connector_lag: dict[str, int]


def pipeline_metrics(url: str) -> PipelineMetrics | None:
    """Scrape ``url`` (None when it does not answer)."""
    try:
        with _DIRECT.open(url, timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return None
    capture_lag: float | None = None
    connector_lag: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "distributary_capture_lag_seconds":
                capture_lag = sample.value
            elif sample.name == "distributary_connector_lag":
                name = sample.labels.get("connector", "")
                connector_lag[name] = connector_lag.get(name, 0) + int(sample.value)
    return PipelineMetrics(capture_lag, connector_lag)


def wal_retained_mb(dsn: str, slot: str) -> float | None:
    """WAL the slot keeps on the server (None while PostgreSQL does not answer)."""
    with contextlib.suppress(psycopg.Error):
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            row = conn.execute("SELECT pg_current_wal_lsn() - restart_lsn "
                               "FROM pg_replication_slots WHERE slot_name = %s",
                               (slot,)).fetchone()
        if row is not None and row[0] is not None:
            return float(row[0]) / 2**20
    return None


def directory_mb(path: Path) -> float:
    """Bytes of the files under ``path`` (files removed while walking are skipped)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(root, name)).st_size
    return total / 2**20
