"""Shared by the snapshot tests: a paced writer, a replay of the log, the table's content."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import orjson
import psycopg
from click.testing import CliRunner

from cdc.capture.runner import Capture, CaptureSettings
from cdc.capture.snapshot.incremental_log import TableSnapshot, read_records, table_states
from cdc.cli import main

from .conftest import CaptureEnv


class PacedWriter(threading.Thread):
    """About ``rate`` transactions per second on ``items(id, v, note)``: mostly updates of
    random ids in ``[1, max_id]``, some deletes, some inserts of new ids."""

    def __init__(self, dsn: str, max_id: int, rate: float = 500.0, seed: int = 11) -> None:
        super().__init__(daemon=True)
        self.dsn, self.max_id, self.rate = dsn, max_id, rate
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.transactions = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                next_id = self.max_id + 1
                started = time.monotonic()
                while not self.stop.is_set():
                    roll = self.rng.random()
                    key = self.rng.randint(1, self.max_id)
                    if roll < 0.8:
                        conn.execute("UPDATE items SET v = v + 1, note = 'upd ' || v "
                                     "WHERE id = %s", (key,))
                    elif roll < 0.9:
                        conn.execute("DELETE FROM items WHERE id = %s", (key,))
                    else:
                        conn.execute("INSERT INTO items VALUES (%s, 0, 'new')", (next_id,))
                        next_id += 1
                    self.transactions += 1
                    ahead = self.transactions / self.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
        except BaseException as exc:  # reported by finish()
            self.error = exc

    def finish(self) -> int:
        """Stop; the number of transactions committed."""
        self.stop.set()
        self.join(timeout=30)
        assert self.error is None, f"the writer failed: {self.error!r}"
        return self.transactions


def fill_items(env: CaptureEnv, rows: int) -> None:
    """``items(id, v, note)`` with ``rows`` rows, and the ``marker`` table ``settle`` uses."""
    env.sql("CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL, note text)",
            "CREATE TABLE marker (id bigint PRIMARY KEY)")
    with psycopg.connect(env.dsn) as conn:
        conn.execute("INSERT INTO items SELECT g, 0, 'row ' || g "
                     "FROM generate_series(1, %s) g", (rows,))


def replay(env: CaptureEnv, table: str) -> dict[bytes, dict[str, Any]]:
    """The table as the log tells it: the newest event of each key by source position."""
    state: dict[bytes, tuple[Any, dict[str, Any] | None]] = {}
    truncated_at = None
    for message in env.events(table):
        event = orjson.loads(message.value)
        if event["op"] == "t":
            truncated_at = message.position
            state.clear()
            continue
        known = state.get(message.key)
        if known is not None and known[0] > message.position:
            continue
        state[message.key] = (message.position,
                              None if event["op"] == "d" else event["after"])
    assert truncated_at is None or all(p > truncated_at for p, _ in state.values())
    return {key: after for key, (_, after) in state.items() if after is not None}


def table_rows(env: CaptureEnv, query: str, key: tuple[str, ...]) -> dict[bytes, dict[str, Any]]:
    """``query``'s rows (as JSON through PostgreSQL, like the codecs write them) by key."""
    with psycopg.connect(env.dsn) as conn:
        rows = [r[0] for r in conn.execute(query.encode()).fetchall()]
    return {orjson.dumps({k: row[k] for k in key}): row for row in rows}


def differences(expected: dict[bytes, Any], found: dict[bytes, Any]) -> str:
    """A short account of how two tables differ ('' when equal)."""
    missing = expected.keys() - found.keys()
    extra = found.keys() - expected.keys()
    stale = [k for k in expected.keys() & found.keys() if expected[k] != found[k]]
    if not (missing or extra or stale):
        return ""
    sample = stale[:3]
    return (f"{len(missing)} missing (e.g. {sorted(missing)[:3]}), {len(extra)} extra "
            f"(e.g. {sorted(extra)[:3]}), {len(stale)} stale "
            f"(e.g. {[(expected[k], found[k]) for k in sample]})")


def settle(env: CaptureEnv, timeout: float = 120.0) -> None:
    """Wait until everything committed so far is in the log: a marker row arrives (a new
    marker every few seconds, in case the slot did not exist yet for the first)."""
    deadline = time.monotonic() + timeout
    stamps: set[int] = set()
    next_marker = 0.0
    while time.monotonic() < deadline:
        if time.monotonic() >= next_marker:
            stamps.add(time.monotonic_ns())
            with psycopg.connect(env.dsn) as conn:
                conn.execute("INSERT INTO marker VALUES (%s)", (max(stamps),))
            next_marker = time.monotonic() + 5
        if any(orjson.loads(m.value)["key"].get("id") in stamps for m in env.events("marker")):
            return
        time.sleep(0.3)
    raise AssertionError("the capture did not catch up with the marker row")


def request_snapshot(env: CaptureEnv, *args: str) -> str:
    """``cdc snapshot -c FILE ARGS``; its output (it must succeed)."""
    result = CliRunner().invoke(main, ["snapshot", "-c", str(env.config_path), *args])
    assert result.exit_code == 0, result.output
    return result.output


def snapshot_state(env: CaptureEnv, table: str) -> TableSnapshot | None:
    """What the log records of ``table``'s incremental snapshot."""
    log = env.open_log()
    try:
        return table_states(read_records(log, env.slot)).get(table)
    finally:
        log.close()


def wait_state(env: CaptureEnv, table: str, state: str, timeout: float = 120.0) -> TableSnapshot:
    """Wait until ``table``'s incremental snapshot reaches ``state``."""
    deadline = time.monotonic() + timeout
    while True:
        found = snapshot_state(env, table)
        if found is not None and found.state == state:
            return found
        assert time.monotonic() < deadline, f"{table}: {found} never became {state}"
        time.sleep(0.3)


def use_config(env: CaptureEnv, **source: str) -> None:
    """Add settings to the test's ``source:`` section."""
    lines = "".join(f"\n  {name}: {value}" for name, value in source.items())
    text = env.config_path.read_text()
    env.config_path.write_text(text.replace("  heartbeat_interval: 1s",
                                            "  heartbeat_interval: 1s" + lines, 1))


class CaptureThread:
    """The capture in a thread, for as long as a ``with`` block (no start-up deadline:
    an initial snapshot of a big table comes first)."""

    def __init__(self, env: CaptureEnv, settings: CaptureSettings | None = None) -> None:
        self.log = env.open_log()
        self.capture = Capture(env.config, self.log,
                               settings or CaptureSettings(batch_delay_s=0.01))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.capture.run, args=(self.stop,), daemon=True)

    def __enter__(self) -> Capture:
        self.thread.start()
        return self.capture

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        self.log.close()
