"""What a non-transactional logical decoding message brings to the log sorts before a
transaction committed right after the message.

PostgreSQL reports such a message at the *end* of its WAL record: the LSN where the next
record begins, which may be the commit of a transaction whose events are numbered at
that very LSN. Found by ``make chaos BACKEND=kafka``: an incremental snapshot's chunk,
numbered at its high watermark's LSN, took the positions ``(L, 0…n)`` of the transaction
committed right after the watermark; positions went backwards in a partition, a sink
kept the chunk's older row, and a capture resuming there (a restart, or a replica
taking over) found the transaction "already in the log" and skipped it — lost. Here a
transaction commits right after the message each time, so its commit record follows
the message's record in the WAL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import psycopg
import pytest

from cdc.capture.runner import Capture
from cdc.capture.snapshot.incremental import IncrementalSnapshots
from cdc.log import Message, Position

from .conftest import CaptureEnv, require_messages
from .snapshot_check import (
    differences,
    fill_items,
    replay,
    request_snapshot,
    settle,
    table_rows,
    use_config,
    wait_state,
)

pytestmark = pytest.mark.integration

ITEMS = "SELECT row_to_json(i) FROM items i"


def in_log_order(env: CaptureEnv, table: str) -> list[Message]:
    """The records of a table's topic as they were appended (partition, offset)."""
    log = env.open_log()
    try:
        return sorted(log.read_to_end(env.topic(table)), key=lambda m: (m.partition, m.offset))
    finally:
        log.close()


def backwards(messages: list[Message]) -> list[tuple[int, Position, Position]]:
    """(partition, previous, position) wherever a position is not past its predecessor."""
    last: dict[int, Position] = {}
    found = []
    for message in messages:
        previous = last.get(message.partition)
        if previous is not None and message.position <= previous:
            found.append((message.partition, previous, message.position))
        last[message.partition] = message.position
    return found


def test_a_commit_right_after_a_high_watermark_sorts_after_the_chunk(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture],
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = capture_env
    require_messages(env.dsn, "incremental snapshots")
    fill_items(env, 50)
    use_config(env, snapshot="never")
    run_capture()
    settle(env)
    late = psycopg.connect(env.dsn)  # open while the chunk is read: invisible to it
    late.execute("UPDATE items SET v = 1 WHERE id = 50")  # the chunk's last row
    late.execute("INSERT INTO items VALUES (51, 1, 'late')")
    emit = IncrementalSnapshots._emit

    def commit_right_after_the_high_watermark(snapshots: IncrementalSnapshots, conn: Any,
                                              content: dict[str, Any]) -> None:
        emit(snapshots, conn, content)
        if content["action"] == "high" and not late.closed:
            late.commit()  # its commit record follows the watermark's in the WAL
            late.close()

    monkeypatch.setattr(IncrementalSnapshots, "_emit", commit_right_after_the_high_watermark)
    try:
        request_snapshot(env, "--table", "public.items")
        wait_state(env, "public.items", "completed")
        settle(env)
    finally:
        late.close()
    messages = in_log_order(env, "items")
    chunk = {m.position.commit_lsn for m in messages if orjson.loads(m.value)["op"] == "r"}
    commit = {m.position.commit_lsn for m in messages
              if orjson.loads(m.value)["after"] == {"id": 51, "v": 1, "note": "late"}}
    assert len(chunk) == 1 and len(commit) == 1 and max(chunk) < min(commit)
    assert backwards(messages) == []
    assert differences(table_rows(env, ITEMS, ("id",)), replay(env, "items")) == ""


def test_a_commit_right_after_an_outbox_message_sorts_after_it(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    require_messages(env.dsn, "outbox messages")
    env.sql("CREATE TABLE marker (id bigint PRIMARY KEY)")
    run_capture()
    with psycopg.connect(env.dsn) as late, psycopg.connect(env.dsn, autocommit=True) as other:
        late.execute("SELECT pg_logical_emit_message(true, 'outbox', '{\"n\": 2}')")
        other.execute("SELECT pg_logical_emit_message(false, 'outbox', '{\"n\": 1}')")
        late.commit()
    settle(env)
    messages = in_log_order(env, "messages")
    contents = [orjson.loads(m.value)["message"]["content"] for m in sorted(
        messages, key=lambda m: m.position)]
    assert contents == [{"n": 1}, {"n": 2}], "the message first, then the transaction's"
    assert backwards(messages) == []
