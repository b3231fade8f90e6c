"""One process at a time holds a join state store: a second waits for the first to let go
(a connector on its way out), is refused with the fix when it does not, and takes over at
once from one killed (the kernel drops the lock with the process)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cdc.plugins.contract import Sink, SinkContext
from connectors.joins import joined_sink, store_path
from connectors.joins.store import JoinStore, StoreTakenError
from connectors.redis.config import RedisSinkConfig
from derived import JoinedView

ITEMS = ("public", "items")
INDEXES = [(ITEMS, ("order_id",))]


def test_a_second_store_waits_for_the_first_to_close(tmp_path: Path) -> None:
    path = tmp_path / "joins.sqlite"
    first = JoinStore(path, INDEXES)
    closer = threading.Timer(0.5, first.close)  # a connector stopping meanwhile
    closer.start()
    started = time.monotonic()
    second = JoinStore(path, INDEXES, lock_wait_s=30)
    waited = time.monotonic() - started
    closer.join()
    assert 0.4 <= waited < 30
    assert second.next_offsets() == {}
    second.close()


def test_a_store_held_after_the_wait_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "joins.sqlite"
    first = JoinStore(path, INDEXES)
    started = time.monotonic()
    with pytest.raises(StoreTakenError, match="held by another process") as refused:
        JoinStore(path, INDEXES, lock_wait_s=0.3)
    assert time.monotonic() - started >= 0.3
    assert str(path) in str(refused.value) and "join_state_dir" in str(refused.value)
    first.close()
    JoinStore(path, INDEXES, lock_wait_s=0).close()  # free once closed


def test_a_store_whose_process_was_killed_is_taken_at_once(tmp_path: Path) -> None:
    path = tmp_path / "joins.sqlite"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from pathlib import Path\n"
         "from connectors.joins.store import JoinStore\n"
         f"store = JoinStore(Path({str(path)!r}), [(('public', 'items'), ('order_id',))])\n"
         "print('open', flush=True)\n"
         "time.sleep(120)\n"],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[3])
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with pytest.raises(StoreTakenError):
            JoinStore(path, INDEXES, lock_wait_s=0.2)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        started = time.monotonic()
        JoinStore(path, INDEXES, lock_wait_s=10).close()
        assert time.monotonic() - started < 5
    finally:
        holder.kill()
        holder.wait(10)


def test_a_store_that_fails_to_open_lets_go_of_its_lock(tmp_path: Path) -> None:
    path = tmp_path / "joins.sqlite"
    path.write_bytes(b"not a database, " * 512)
    for _ in range(2):  # the second attempt is refused by SQLite, not by the lock
        started = time.monotonic()
        with pytest.raises(sqlite3.DatabaseError, match="not a database"):
            JoinStore(path, INDEXES, lock_wait_s=5)
        assert time.monotonic() - started < 4


def test_a_joined_sink_whose_inner_sink_cannot_be_built_holds_no_store(tmp_path: Path) -> None:
    """The inner sink is built before the store is opened: a factory that fails leaves no
    lock behind it (a retry in the same process would wait for itself)."""
    view = JoinedView.model_validate({
        "source": "public.orders", "target": "orders",
        "lookups": [{"name": "customer", "source": "public.customers",
                     "on": {"customer_id": "id"}, "fields": ["name"]}]})
    config = RedisSinkConfig.model_validate({"url": "redis://127.0.0.1:1/0",
                                             "joins": [view.model_dump()],
                                             "join_state_dir": str(tmp_path)})

    def failing(config: Any, context: SinkContext) -> Sink:
        raise ValueError("the inner sink cannot be built")

    context = SinkContext(connector="cache", topic_prefix="app")
    with pytest.raises(ValueError, match="cannot be built"):
        joined_sink(failing, config, context, batch_size=10)
    JoinStore(store_path(config, "cache"), [], lock_wait_s=0).close()
