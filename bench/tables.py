"""The capture over thousands of tables (``make bench-tables``).

Starts its own PostgreSQL with 2,000 tables (``BENCH_TABLES``) of one row each, selected
by the pattern ``public.t_*``, captured into a file log of 3 partitions per topic by
``cdc capture`` running under ``ulimit -n 1024``. Three runs of the process:

1. no slot yet: the initial snapshot of every table, until the capture streams
   (``tables_snapshot_s``, from process start);
2. a restart with the existing slot, until it streams (``tables_startup_s``); then a
   row in every partition of every table (every partition writer warm: the keys are
   chosen to hash to each partition), and, each written while the
   process is paused (SIGSTOP) so the changes wait in the slot: a workload spread evenly
   over all the tables, and the same workload on one table — events per second from
   SIGCONT until all of it is durable and acknowledged. A first short round of each
   sizes the timed ones: ``BENCH_TABLES_ROUNDS`` (3) rounds, spread and one table
   interleaved, each side sized to take at least ``BENCH_TABLES_SECONDS`` (10 s; a
   round timed shorter is done again, larger); the medians are printed, and each round's
   ratio.

"Streams" is ``/healthz`` answering 200; "durable" is the slot's confirmed flush position
passing a marker transaction written after the workload. ``/proc`` is sampled for the
process's open descriptors and its peak RSS over the three runs. Prints ``name=value``
lines, the headline ratio (spread over one table, events/s) last.

``BENCH_PROFILE=DIR`` attaches ``py-spy record`` (raw stacks, every thread) to the
capture for each timed side: ``DIR/spread-<n>.txt`` and ``DIR/one_table-<n>.txt``.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from bench.procs import cpu_seconds, server_pid
from cdc.capture.source.publication import selected_tables
from cdc.log import partition_for
from compose.launcher import PostgresServer
from compose.launcher.base import free_port

TABLES = int(os.environ.get("BENCH_TABLES", "2000"))
SCALE = float(os.environ.get("BENCH_SCALE", "1"))
ROWS_PER_TRANSACTION = 10
TRANSACTIONS = int(10_000 * SCALE)  # the sizing round's, per side
SECONDS = float(os.environ.get("BENCH_TABLES_SECONDS", "10"))  # timed per side, at least
ROUNDS = int(os.environ.get("BENCH_TABLES_ROUNDS", "3"))
OPEN_FILES = 1024
PROFILE = os.environ.get("BENCH_PROFILE")
PATTERN = "public.t_*"
PARTITIONS = 3
SLOT = "bench_tables"

CREATE_TABLES = """
DO $$ BEGIN
  FOR i IN 0 .. {last} LOOP
    EXECUTE format('CREATE TABLE %I (id bigint PRIMARY KEY, note text, at timestamptz)',
                   't_' || lpad(i::text, 4, '0'));
    EXECUTE format('INSERT INTO %I VALUES (1, %L, now())', 't_' || lpad(i::text, 4, '0'),
                   'snapshot');
  END LOOP;
END $$"""
# transaction k inserts ROWS_PER_TRANSACTION rows: into consecutive tables (spread), or
# all into t_0000 (one table); the statements are the same either way
WORKLOAD = """
DO $$ DECLARE n bigint; BEGIN
  FOR k IN 0 .. {transactions} - 1 LOOP
    FOR j IN 0 .. {rows} - 1 LOOP
      n := k * {rows} + j;
      EXECUTE format('INSERT INTO %I VALUES ($1, $2, now())',
                     't_' || lpad(CASE WHEN {spread} THEN (n % {tables})::text ELSE '0' END,
                                  4, '0'))
        USING {first_id} + CASE WHEN {spread} THEN n / {tables} ELSE n END, 'change ' || n;
    END LOOP;
    COMMIT;
  END LOOP;
END $$"""


def create_tables(dsn: str) -> int:
    """``TABLES`` tables of one row each, in one transaction; returns what the pattern
    selects."""
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL(CREATE_TABLES).format(last=sql.Literal(TABLES - 1)))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        return len(selected_tables(conn, (PATTERN,)))


WARM = """
DO $$ BEGIN
  FOR i IN 0 .. {last} LOOP
    EXECUTE format('INSERT INTO %I SELECT id, ''warm'', now() FROM unnest($1) AS id',
                   't_' || lpad(i::text, 4, '0')) USING {ids}::bigint[];
  END LOOP;
END $$"""
WARM_FROM_ID = 100_000_000  # far from the workloads' keys


def warm_keys() -> list[int]:
    """Ids whose keys (``{"id":N}``) land in each of the topics' partitions."""
    found: dict[int, int] = {}
    candidate = WARM_FROM_ID
    while len(found) < PARTITIONS:
        found.setdefault(partition_for(b'{"id":%d}' % candidate, PARTITIONS), candidate)
        candidate += 1
    return sorted(found.values())


def warm_every_partition(dsn: str) -> int:
    """One row per partition in every table; returns a WAL position past it."""
    query = sql.SQL(WARM).format(last=sql.Literal(TABLES - 1),
                                 ids=sql.Literal(warm_keys()))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(query)
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
        conn.execute("UPDATE t_0001 SET note = 'marker' WHERE id = 1")
    assert row is not None
    return int(row[0])


def write_workload(dsn: str, spread: bool, transactions: int, first_id: int
                   ) -> tuple[int, int]:
    """The workload (one commit per transaction; new keys from ``first_id``), then a marker
    transaction; returns the events and a WAL position the marker's acknowledgement
    passes."""
    query = sql.SQL(WORKLOAD).format(first_id=sql.Literal(first_id),
        transactions=sql.Literal(transactions), rows=sql.Literal(ROWS_PER_TRANSACTION),
        tables=sql.Literal(TABLES), spread=sql.Literal(spread))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(query)
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
        conn.execute("UPDATE t_0001 SET note = 'marker' WHERE id = 1")
    assert row is not None
    return transactions * ROWS_PER_TRANSACTION, int(row[0])


@dataclass
class Peaks:
    """The highest open descriptors and RSS seen in the capture's process."""

    open_files: int = 0
    rss_kb: int = 0

    def sample(self, pid: int) -> None:
        try:
            self.open_files = max(self.open_files, len(os.listdir(f"/proc/{pid}/fd")))
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    self.rss_kb = max(self.rss_kb, int(line.split()[1]))
        except (FileNotFoundError, ProcessLookupError):
            pass


class CaptureProcess:
    """``cdc capture`` under ``ulimit -n OPEN_FILES``, watched through ``/healthz``."""

    def __init__(self, config: Path, port: int, stderr: Path, peaks: Peaks) -> None:
        self.port, self.peaks = port, peaks
        self.started = time.perf_counter()
        with stderr.open("ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cdc.cli", "capture", "-c", str(config)],
                stdout=subprocess.DEVNULL, stderr=err, preexec_fn=_limit_open_files)
        self.stderr = stderr

    def _sample(self) -> None:
        self.peaks.sample(self.proc.pid)
        if self.proc.poll() is not None:
            raise RuntimeError(f"cdc capture exited with {self.proc.returncode}: "
                               f"{self.stderr.read_text()[-3000:]}")

    def until_streaming(self, timeout_s: float = 1800) -> float:
        """Seconds from process start until ``/healthz`` answers 200."""
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            self._sample()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz",
                                            timeout=5) as response:
                    if response.status == 200:
                        return time.perf_counter() - self.started
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.01)
        raise RuntimeError("the capture never streamed")

    def until_acknowledged(self, dsn: str, lsn: int, timeout_s: float = 1800) -> float:
        """Seconds until the slot's confirmed flush position passes ``lsn``."""
        started = time.perf_counter()
        with psycopg.connect(dsn, autocommit=True) as conn:
            while time.perf_counter() - started < timeout_s:
                self._sample()
                row = conn.execute("SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM "
                                   "pg_replication_slots WHERE slot_name = %s",
                                   (SLOT,)).fetchone()
                if row is not None and row[0] is not None and int(row[0]) > lsn:
                    return time.perf_counter() - started
                time.sleep(0.01)
        raise RuntimeError("the capture never acknowledged the workload")

    def stop(self) -> None:
        self.peaks.sample(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _limit_open_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


def write_config(path: Path, dsn: str, port: int) -> None:
    path.write_text(f"""
source:
  dsn: {dsn}
  slot: {SLOT}
  publication: {SLOT}
  tables: ['{PATTERN}']
log:
  backend: file
  path: {path.parent / 'log'}
  partitions: {PARTITIONS}
metrics:
  port: {port}
  sample_interval: 1s
""")


@dataclass
class Keys:
    """The next new key of each side's workload (every round inserts new rows)."""

    spread: int = 10
    one_table: int = 1_000_000

    def take(self, spread: bool, events: int) -> int:
        """The first key of a workload of ``events`` rows; the next starts past it."""
        if spread:
            first, self.spread = self.spread, self.spread + events // TABLES + 2
        else:
            first, self.one_table = self.one_table, self.one_table + events + 1
        return first


@dataclass
class Timed:
    """One workload's figures: events per second, seconds timed, CPU µs per event of the
    capture and of PostgreSQL (its walsender, mostly) while timed."""

    rate: float
    seconds: float
    capture_us: float
    postgres_us: float


def timed_workload(capture: CaptureProcess, dsn: str, postgres: int, spread: bool,
                   transactions: int, keys: Keys) -> Timed:
    """One workload written while the capture is paused, then timed until acknowledged."""
    capture.proc.send_signal(signal.SIGSTOP)
    try:
        events, lsn = write_workload(dsn, spread, transactions,
                                     keys.take(spread, transactions * ROWS_PER_TRANSACTION))
        cpu = cpu_seconds(capture.proc.pid), cpu_seconds(postgres)
    finally:
        capture.proc.send_signal(signal.SIGCONT)
    with _profiled(capture.proc.pid, "spread" if spread else "one_table"):
        seconds = capture.until_acknowledged(dsn, lsn)
    capture_s = cpu_seconds(capture.proc.pid) - cpu[0]
    postgres_s = cpu_seconds(postgres) - cpu[1]
    return Timed(events / seconds, seconds, capture_s * 1e6 / events,
                 postgres_s * 1e6 / events)


@contextlib.contextmanager
def _profiled(pid: int, side: str) -> Iterator[None]:
    """``py-spy record`` attached to ``pid`` meanwhile, when ``BENCH_PROFILE`` names a
    directory (one file per timed side and round)."""
    if not PROFILE:
        yield
        return
    directory = Path(PROFILE)
    directory.mkdir(parents=True, exist_ok=True)
    output = directory / f"{side}-{len(list(directory.glob(side + '-*')))}.txt"
    py_spy = str(Path(sys.executable).with_name("py-spy"))
    recorder = subprocess.Popen([py_spy, "record", "-r", "200", "-f", "raw", "--threads",
                                 "--nonblocking", "-p", str(pid), "-o", str(output)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(timeout=60)


def main() -> None:
    """Snapshot, restart, the two workloads in rounds; print the figures."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-tables-"))
    peaks = Peaks()
    keys = Keys()
    rounds: list[dict[bool, Timed]] = []
    try:
        with PostgresServer(settings={"max_wal_size": "4GB",
                                      "max_locks_per_transaction": "256"}) as server:
            dsn = server.dsn()
            postgres = server_pid(server.port)
            assert postgres is not None, "PostgreSQL's postmaster not found"
            count = create_tables(dsn)
            config, port = workdir / "pipeline.yaml", free_port()
            write_config(config, dsn, port)
            stderr = workdir / "capture.log"

            capture = CaptureProcess(config, port, stderr, peaks)
            snapshot_s = capture.until_streaming()
            capture.stop()

            capture = CaptureProcess(config, port, stderr, peaks)
            startup_s = capture.until_streaming()
            try:
                capture.until_acknowledged(dsn, warm_every_partition(dsn))
                sizing = {spread: timed_workload(capture, dsn, postgres, spread,
                                                 TRANSACTIONS, keys)
                          for spread in (True, False)}
                transactions = {spread: max(TRANSACTIONS, int(
                    timed.rate * SECONDS * 1.2 / ROWS_PER_TRANSACTION))
                    for spread, timed in sizing.items()}
                for _ in range(ROUNDS * 3):  # a round timed too short is done again
                    if len(rounds) == ROUNDS:
                        break
                    results = {}
                    for spread in (True, False):
                        results[spread] = timed_workload(capture, dsn, postgres, spread,
                                                         transactions[spread], keys)
                        if results[spread].seconds < SECONDS:  # faster at this size
                            transactions[spread] = int(transactions[spread] * 1.2
                                                       * SECONDS / results[spread].seconds)
                    if min(timed.seconds for timed in results.values()) >= SECONDS:
                        rounds.append(results)
            finally:
                capture.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if not rounds:
        rounds = [sizing]

    def median(spread: bool, figure: str) -> float:
        return float(statistics.median(getattr(r[spread], figure) for r in rounds))

    print(f"tables_count={count}")
    print(f"tables_snapshot_s={snapshot_s:.1f}")
    print(f"tables_startup_s={startup_s:.1f}")
    print(f"tables_peak_open_files={peaks.open_files}")
    print(f"tables_peak_rss_mb={peaks.rss_kb / 1024:.0f}")
    print(f"tables_rounds={len(rounds)}")
    print(f"tables_shortest_timed_s={min(t.seconds for r in rounds for t in r.values()):.1f}")
    for number, results in enumerate(rounds, 1):
        print(f"tables_stream_ratio_round_{number}="
              f"{results[True].rate / results[False].rate:.2f}")
    for spread, side in ((True, "spread"), (False, "one_table")):
        print(f"tables_{side}_cpu_us_capture={median(spread, 'capture_us'):.2f}")
        print(f"tables_{side}_cpu_us_postgres={median(spread, 'postgres_us'):.2f}")
    print(f"tables_spread_events_per_s={median(True, 'rate'):.0f}")
    print(f"tables_one_table_events_per_s={median(False, 'rate'):.0f}")
    print(f"tables_stream_ratio_vs_one_table="
          f"{statistics.median(r[True].rate / r[False].rate for r in rounds):.2f}")


if __name__ == "__main__":
    main()
