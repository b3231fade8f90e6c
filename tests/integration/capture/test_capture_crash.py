"""kill -9 the capture at chosen points and at random: nothing lost, nothing duplicated.

Every transaction bumps a per-key counter, so for each key the log must hold exactly
the counter values 0, 1, 2, … in order: a gap is a loss, a repeat a duplicate.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import psycopg
import pytest

from tests.integration.connectors.harness import wait_until

from .conftest import CaptureEnv

KEYS = 40  # the ids 0..39 inserted by prepare()


def start_capture(env: CaptureEnv, crash_at: str | None = None,
                  stderr: Path | None = None) -> subprocess.Popen[bytes]:
    """``cdc capture`` in its own process (optionally set to kill itself somewhere; its
    stderr into the file ``stderr`` if given)."""
    environ = dict(os.environ)
    environ.pop("DISTRIBUTARY_CRASH_AT", None)
    if crash_at:
        environ["DISTRIBUTARY_CRASH_AT"] = crash_at
    with stderr.open("ab") if stderr is not None else contextlib.nullcontext() as err:
        return subprocess.Popen([sys.executable, "-m", "cdc.cli", "capture", "-c",
                                 str(env.config_path)], env=environ,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL if err is None else err)


def workload(env: CaptureEnv, transactions: int, stop: threading.Event,
             pause: float = 0.0) -> None:
    """Each transaction bumps the counters of a few keys."""
    rng = random.Random(7)
    with psycopg.connect(env.dsn, autocommit=False) as conn:
        for _ in range(transactions):
            if stop.is_set():
                return
            for key in rng.sample(range(KEYS), 3):
                conn.execute("UPDATE counters SET n = n + 1 WHERE id = %s", (key,))
            conn.commit()
            if pause:
                time.sleep(pause)


def check_exactly_once(env: CaptureEnv) -> int:
    """Compare the log with the final table; return the number of events checked."""
    with psycopg.connect(env.dsn) as conn:
        final: dict[int, int] = dict(conn.execute("SELECT id, n FROM counters").fetchall())
    seen: dict[int, list[int]] = {}
    messages = env.events("counters")
    for message in messages:
        event = orjson.loads(message.value)
        seen.setdefault(event["key"]["id"], []).append(event["after"]["n"])
    for key, n in final.items():
        assert seen.get(key) == list(range(n + 1)), f"key {key}: {seen.get(key)} vs 0..{n}"
    positions = [m.position for m in messages]
    assert len(set(positions)) == len(positions)
    return len(messages)


def wait_caught_up(env: CaptureEnv, timeout: float = 90.0) -> None:
    with psycopg.connect(env.dsn) as conn:
        row = conn.execute("SELECT sum(n) FROM counters").fetchone()
    assert row is not None
    expected = KEYS + int(row[0])
    env.wait_for("counters", expected, timeout)


def slot_active(env: CaptureEnv) -> bool:
    with psycopg.connect(env.dsn) as conn:
        row = conn.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                           (env.slot,)).fetchone()
    return bool(row and row[0])


def prepare(env: CaptureEnv) -> None:
    env.sql("CREATE TABLE counters (id int PRIMARY KEY, n int NOT NULL)")
    proc = start_capture(env)
    try:
        wait_until(lambda: proc.poll() is None and slot_active(env), timeout=60,
                   what="cdc capture streams from its slot", interval=0.05)
        env.sql("INSERT INTO counters SELECT g, 0 FROM generate_series(0, 39) g")
        assert len(env.wait_for("counters", KEYS)) == KEYS, "the 40 inserts are logged"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("crash_at", ["before_append:3", "mid_append:3", "after_append:3"])
def test_crash_at_a_chosen_point(capture_env: CaptureEnv, crash_at: str) -> None:
    env = capture_env
    prepare(env)
    stop = threading.Event()
    writer = threading.Thread(target=workload, args=(env, 300, stop, 0.01))
    writer.start()
    stderr = env.config_path.with_name("crashing.stderr")
    crashing = start_capture(env, crash_at, stderr)
    try:
        code = crashing.wait(timeout=60)
        assert code == -signal.SIGKILL, (
            f"the crash point was not reached: exit code {code}; {stderr.read_text()[-3000:]}")
    finally:
        crashing.kill()
        writer.join()
    survivor = start_capture(env)
    try:
        wait_caught_up(env)
        assert check_exactly_once(env) >= KEYS + 300 * 3
    finally:
        survivor.terminate()
        survivor.wait(timeout=30)


def test_kill_9_at_random_moments(capture_env: CaptureEnv) -> None:
    env = capture_env
    prepare(env)
    stop = threading.Event()
    writer = threading.Thread(target=workload, args=(env, 1500, stop, 0.006))
    writer.start()
    rng = random.Random(11)
    kills = 0
    try:
        while writer.is_alive() and kills < 6:
            proc = start_capture(env)
            time.sleep(rng.uniform(0.8, 2.0))  # the test's input: a kill at a random moment
            proc.kill()
            proc.wait()
            kills += 1
    finally:
        writer.join()
    survivor = start_capture(env)
    try:
        wait_caught_up(env)
        check_exactly_once(env)
    finally:
        survivor.terminate()
        survivor.wait(timeout=30)
    assert kills >= 3

