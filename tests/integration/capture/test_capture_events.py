"""The capture against real PostgreSQL: events as docs/architecture.md describes them."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import psycopg
from psycopg import sql

from cdc.capture.lsn import parse_lsn
from cdc.capture.runner import Capture
from cdc.capture.source.messages import sends_messages

from .conftest import CaptureEnv, server_version


def test_insert_update_delete_truncate_events(capture_env: CaptureEnv,
                                              run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    env.sql("CREATE TABLE orders (id bigint PRIMARY KEY, status text, amount numeric(12,2),"
            " note text, created_at timestamptz)")
    run_capture()
    env.sql("INSERT INTO orders VALUES (1, 'new', 12.50, 'n1', '2026-11-21 10:00:00+00'),"
            " (2, 'new', 99999999.99, NULL, '2026-11-21 11:00:00+01')")
    env.sql("UPDATE orders SET status = 'paid' WHERE id = 1")
    env.sql("UPDATE orders SET id = 20 WHERE id = 2")
    env.sql("DELETE FROM orders WHERE id = 1")
    env.sql("TRUNCATE orders")
    env.wait_for("orders", 7)
    events = env.values("orders")
    assert [(e["op"], e["key"]) for e in events] == [
        ("c", {"id": 1}), ("c", {"id": 2}), ("u", {"id": 1}), ("d", {"id": 2}),
        ("c", {"id": 20}), ("d", {"id": 1}), ("t", {})]
    first = events[0]
    assert first["after"] == {"id": 1, "status": "new", "amount": "12.50", "note": "n1",
                              "created_at": "2026-11-21T10:00:00Z"}
    assert first["before"] is None and first["unchanged"] == []
    assert events[1]["after"]["amount"] == "99999999.99"
    assert events[1]["after"]["created_at"] == "2026-11-21T10:00:00Z"
    assert events[2]["after"]["status"] == "paid"
    source = first["source"]
    assert source["db"] == env.slot and source["schema"] == "public"
    assert source["table"] == "orders" and source["snapshot"] is False
    assert source["seq"] == 0 and events[1]["source"]["seq"] == 1
    assert source["commit_lsn"] == events[1]["source"]["commit_lsn"]
    assert isinstance(source["txid"], int) and source["commit_ts"].endswith("Z")
    positions = [(parse_lsn(e["source"]["commit_lsn"]), e["source"]["seq"]) for e in events]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    assert all(e["schema_version"] == 1 for e in events)


def test_toast_unchanged_and_replica_identity_full(capture_env: CaptureEnv,
                                                   run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    env.sql("CREATE TABLE docs (id int PRIMARY KEY, title text, body text)",
            "ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL",
            "CREATE TABLE audit (id int PRIMARY KEY, v text, body text)",
            "ALTER TABLE audit REPLICA IDENTITY FULL",
            "ALTER TABLE audit ALTER COLUMN body SET STORAGE EXTERNAL")
    run_capture()
    big = "x" * 100_000
    env.sql("INSERT INTO docs VALUES (1, 'a', repeat('x', 100000))")
    env.sql("UPDATE docs SET title = 'b' WHERE id = 1")
    env.sql("INSERT INTO audit VALUES (1, 'one')", "UPDATE audit SET v = 'uno'",
            "DELETE FROM audit")
    env.sql("INSERT INTO audit VALUES (2, 'two', repeat('y', 100000))")
    env.sql("UPDATE audit SET id = 3, v = 'tres' WHERE id = 2")  # a key change
    docs = env.wait_for("docs", 2)
    assert len(docs) == 2
    update = orjson.loads(docs[1].value)
    assert update["op"] == "u" and update["unchanged"] == ["body"]
    assert "body" not in update["after"], "an unchanged TOAST value is never null"
    assert orjson.loads(docs[0].value)["after"]["body"] == big
    audit = [orjson.loads(m.value) for m in env.wait_for("audit", 6)]
    assert [e["op"] for e in audit] == ["c", "u", "d", "c", "d", "c"]
    assert audit[1]["before"] == {"id": 1, "v": "one", "body": None}
    assert audit[2]["before"] == {"id": 1, "v": "uno", "body": None}
    assert audit[2]["key"] == {"id": 1}
    # the key change's insert leaves nothing unchanged: the whole old row completes it
    # (no sink holds a row of the new key to take the TOASTed body from)
    moved = audit[5]
    assert audit[4]["key"] == {"id": 2} and moved["key"] == {"id": 3}
    assert moved["after"] == {"id": 3, "v": "tres", "body": "y" * 100_000}
    assert moved["unchanged"] == [] and list(moved["after"]) == ["id", "v", "body"]


def test_outbox_messages_and_large_streamed_transaction(
        capture_env: CaptureEnv, run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    env.sql("CREATE TABLE items (id int PRIMARY KEY, payload text)")
    with psycopg.connect(env.dsn, autocommit=True) as conn:  # force streaming early
        conn.execute(sql.SQL("ALTER DATABASE {} SET logical_decoding_work_mem = '64kB'")
                     .format(sql.Identifier(env.slot)))
    # PostgreSQL 13: no outbox messages, and the big transactions are decoded at their
    # commit instead of streamed before it (README's version table); the same rows arrive
    messages = sends_messages(server_version(env.dsn))
    outbox = ["SELECT pg_logical_emit_message(true, 'outbox', '{\"order\": 7}')"]
    run_capture()
    env.sql("INSERT INTO items SELECT g, repeat('p', 200) FROM generate_series(1, 3000) g",
            "SAVEPOINT s1",
            "INSERT INTO items SELECT g, 'aborted' FROM generate_series(3001, 4000) g",
            "ROLLBACK TO SAVEPOINT s1",
            "INSERT INTO items SELECT g, 'kept' FROM generate_series(4001, 4500) g",
            *(outbox if messages else []))
    with psycopg.connect(env.dsn) as conn:  # a big transaction that aborts
        conn.execute("INSERT INTO items SELECT g, 'gone' FROM generate_series(9001, 12000) g")
        conn.rollback()
    env.sql("INSERT INTO items SELECT g, 'x' FROM generate_series(5001, 8000) g")
    items = env.wait_for("items", 6500)
    ids = sorted(orjson.loads(m.key)["id"] for m in items)
    assert ids == list(range(1, 3001)) + list(range(4001, 4501)) + list(range(5001, 8001))
    assert len({m.position for m in items}) == len(items)
    if not messages:
        assert env.events("messages") == []
        return
    found = env.wait_for("messages", 1)
    assert [orjson.loads(m.value)["message"]["content"] for m in found] == [{"order": 7}]
    with psycopg.connect(env.dsn) as conn:
        streamed = conn.execute("SELECT stream_txns FROM pg_stat_replication_slots "
                                "WHERE slot_name = %s", (env.slot,)).fetchone()
    assert streamed is not None and streamed[0] >= 2, "the big transactions were streamed"
