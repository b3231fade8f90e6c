"""``cdc reconcile`` against a real ``cdc run`` (PostgreSQL → OpenSearch with a filtering
view, and Redis) while a workload of at least 500 transactions/s writes: clean runs report
nothing, drift injected by hand is reported exactly, ``--repair`` fixes it and waits until
it has landed, so the very next run is clean."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass

import psycopg

from tests.integration.connectors.harness import wait_until

from .conftest import HOT, NEW_IDS, ROWS, Pipeline, StartPipeline, inject_drift

SUMMARY = re.compile(r"reconcile: tables=(\d+) rows=(\d+) missing=(\d+) extra=(\d+) "
                     r"different=(\d+)")


@dataclass
class Run:
    code: int
    lines: list[str]
    summary: tuple[int, ...]


def reconcile(pipeline: Pipeline, *args: str) -> Run:
    done = subprocess.run([sys.executable, "-m", "cdc.cli", "reconcile", "-c",
                           str(pipeline.config), "--timeout", "60", *args],
                          capture_output=True, text=True, timeout=600)
    match = SUMMARY.search(done.stdout)
    assert match is not None, (done.returncode, done.stdout, done.stderr)
    lines = [line for line in done.stdout.splitlines() if not line.startswith("reconcile:")]
    return Run(done.returncode, lines, tuple(int(g) for g in match.groups()))


class Workload:
    """Updates, inserts and deletes on the hot ids from ``THREADS`` threads, each statement
    its own transaction, ``BATCH`` of them sent at once (pipeline mode), at about
    ``TARGET`` transactions per second in all."""

    THREADS = 3
    BATCH = 10
    TARGET = 700.0

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._stop = threading.Event()
        self.counts = [0] * self.THREADS
        self.error: BaseException | None = None
        self._threads = [threading.Thread(target=self._run, args=(n,), daemon=True)
                         for n in range(self.THREADS)]
        self._started = 0.0

    @property
    def transactions(self) -> int:
        return sum(self.counts)

    def rate(self) -> float:
        return self.transactions / (time.monotonic() - self._started)

    def __enter__(self) -> Workload:
        self._started = time.monotonic()
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        assert self.error is None, self.error

    def _run(self, number: int) -> None:
        pick = random.Random(number)
        next_id = NEW_IDS + number * 1_000_000
        inserted: deque[int] = deque()
        per_thread = self.TARGET / self.THREADS
        try:
            with psycopg.connect(self._dsn, autocommit=True) as conn:
                while not self._stop.is_set():
                    with conn.pipeline() as pipeline:
                        for _ in range(self.BATCH):
                            next_id = self._one(conn, pick, next_id, inserted)
                            # a Sync ends each statement's transaction: without it the
                            # batch is one implicit transaction, and three threads
                            # updating hot rows in random orders deadlock
                            pipeline.sync()
                    self.counts[number] += self.BATCH
                    ahead = self.counts[number] / per_thread - (time.monotonic() - self._started)
                    if ahead > 0:
                        time.sleep(ahead)
        except BaseException as exc:  # reported by __exit__
            self.error = exc

    @staticmethod
    def _one(conn: psycopg.Connection[tuple[object, ...]], pick: random.Random, next_id: int,
             inserted: deque[int]) -> int:
        action = pick.random()
        if action < 0.7 or (action >= 0.85 and not inserted):
            conn.execute("UPDATE orders SET status = %s, amount = amount + 1, "
                         "score = random() WHERE id = %s",
                         (pick.choice(["paid", "sent", "draft"]), pick.randint(1, HOT)))
        elif action < 0.85:
            next_id += 1
            conn.execute("INSERT INTO orders VALUES (%s, 'new', 1.5, 0.1, now(), "
                         "'[1, 2]', 'new row')", (next_id,))
            inserted.append(next_id)
        else:
            conn.execute("DELETE FROM orders WHERE id = %s", (inserted.popleft(),))
        return next_id


def _kinds(run: Run) -> set[tuple[str, str]]:
    found = set()
    for line in run.lines:
        match = re.match(r"(missing|extra|different) public\.orders (\S+) (?:index \S+|redis) "
                         r"(\S+?): ", line)
        assert match is not None, line
        found.add((match.group(1), f"{match.group(2)} {match.group(3)}"))
    return found


def test_reconcile_reports_drift_exactly_and_repairs_it(
        start_pipeline: StartPipeline, opensearch_url: str, redis_url: str) -> None:
    pipeline = start_pipeline()
    prefix = f"{pipeline.name}:orders"
    with Workload(pipeline.dsn) as workload:
        def under_way() -> bool:
            assert workload.error is None, workload.error
            return workload.transactions >= 1000

        wait_until(under_way, timeout=60, what="the workload commits its first 1000 "
                   "transactions")
        for _ in range(3):  # no false positive under load
            clean = reconcile(pipeline)
            assert (clean.code, clean.lines) == (0, []), (clean, pipeline.stderr)
            assert clean.summary[:1] == (1,) and clean.summary[2:] == (0, 0, 0)
            assert clean.summary[1] >= ROWS - HOT
        inject_drift(pipeline.name, opensearch_url, redis_url)
        drift = reconcile(pipeline)
        assert drift.code == 1, drift
        assert _kinds(drift) == {
            ("missing", "search 1601"), ("different", "search 1801"),
            ("extra", "search 999999"), ("extra", "search 1900"),
            ("different", f"cache {prefix}:1701"), ("different", f"cache {prefix}:1851"),
            ("extra", f"cache {prefix}:888888")}, drift.lines
        assert drift.summary[2:] == (1, 3, 3), drift
        assert any("the view filters this row out" in line for line in drift.lines)
        assert any("note: \"row 1701\" in the table, \"changed by hand\" in the sink" in line
                   for line in drift.lines)
        repaired = reconcile(pipeline, "--repair")
        assert repaired.code == 1 and repaired.summary[2:] == (1, 3, 3), repaired
        repairs = [line for line in repaired.lines if line.startswith("repair: ")]
        assert any(line.startswith("repair: requested an incremental snapshot")
                   for line in repairs), repaired
        assert any("completed and the sinks caught up" in line for line in repairs), repaired
        after = reconcile(pipeline)  # once: the repair has landed when --repair returns
        assert (after.code, after.lines) == (0, []), after
        assert after.summary[2:] == (0, 0, 0), after
        assert workload.rate() >= 500, workload.rate()
