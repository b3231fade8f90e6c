"""Capture replicas on one host share the slot's spool base directory: each process
spools in its own subdirectory, and only spools of processes gone are swept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cdc.capture.stream.spool import StreamSpool


def _gone_pid() -> int:
    """The pid of a process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_replica_starting_leaves_a_running_replicas_spool_alone(tmp_path: Path) -> None:
    base = tmp_path / "distributary-spool-app"
    running = StreamSpool.for_process(base, pid=os.getppid())
    running.add_frame(42, b"frame of the running replica")
    gone = base / str(_gone_pid())
    gone.mkdir()
    (gone / "7.spool").write_bytes(b"left by a killed replica")

    mine = StreamSpool.for_process(base)
    mine.add_frame(43, b"mine")
    mine.close()

    assert mine.directory == base / str(os.getpid())
    assert not mine.directory.exists()
    assert not gone.exists(), "a dead process's spool is swept"
    assert (running.directory / "42.spool").exists(), "a live replica's spool is kept"
    running.add_frame(44, b"still writable")
    assert (running.directory / "44.spool").exists()


def test_the_last_spool_closed_removes_the_slots_base_directory(tmp_path: Path) -> None:
    base = tmp_path / "distributary-spool-app"
    other = StreamSpool.for_process(base, pid=os.getppid())  # a replica still running
    mine = StreamSpool.for_process(base)
    mine.add_frame(43, b"mine")

    mine.close()
    assert base.is_dir(), "kept while another replica spools in it"
    other.close()
    assert not base.exists(), "removed with the last spool: nothing is left per slot"
