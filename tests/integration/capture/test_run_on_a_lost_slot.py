"""``cdc run`` on a lost slot stops with the capture's error (status 3) instead of
restarting the capture forever; with ``--recreate-lost-slot`` it passes the flag on."""

from __future__ import annotations

import subprocess
import sys

import psycopg

from .conftest import CaptureEnv
from .test_wal_safety import env, lose_slot, server, start_capture, stop, wait_for_ops

__all__ = ["env", "server"]  # the fixtures, shared with test_wal_safety


def test_run_stops_on_a_lost_slot_and_recovers_with_the_flag(env: CaptureEnv) -> None:
    capture = start_capture(env)
    try:
        wait_for_ops(env, {50: "r"})
    finally:
        stop(capture)
    with psycopg.connect(env.dsn, autocommit=True) as conn:  # only a new snapshot brings it
        conn.execute("INSERT INTO t VALUES (101, 'new')")
    lose_slot(env)

    refused = subprocess.run([sys.executable, "-m", "cdc.cli", "run", "-c",
                              str(env.config_path)], capture_output=True, text=True,
                             timeout=120, check=False)
    assert refused.returncode == 3, refused.stderr
    assert "replication slot 'walsafe' is lost" in refused.stderr, refused.stderr
    assert "--recreate-lost-slot" in refused.stderr, refused.stderr
    assert refused.stderr.count("started capture") == 1, "no restart: it cannot help"
    assert refused.stderr.splitlines()[-1].startswith("Error: capture exited with status 3")

    recovering = subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c",
                                   str(env.config_path), "--recreate-lost-slot"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_ops(env, {101: "r"})
    finally:
        err = stop(recovering)
    assert recovering.returncode == 0, err
    assert "dropped lost replication slot walsafe" in err, err
