"""Smoke test: one pgoutput change over a ``replication=database`` connection (psycopg.pq)."""

from __future__ import annotations

import time

import psycopg
from psycopg import sql

from cdc.capture.stream.replication import Keepalive, ReplicationConnection, XLogData


def test_receives_one_insert_over_pgoutput(postgres_dsn: str, unique_name: str) -> None:
    table, slot = unique_name, unique_name
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, note text)")
                     .format(sql.Identifier(table)))
        conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}")
                     .format(sql.Identifier(slot), sql.Identifier(table)))
    repl = ReplicationConnection(postgres_dsn)
    try:
        identity = repl.identify_system()
        assert identity.timeline >= 1
        consistent_point, _ = repl.create_slot(slot, temporary=True)
        assert consistent_point > 0
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("INSERT INTO {} VALUES (7, 'hello replication')")
                         .format(sql.Identifier(table)))
        repl.start(slot, [slot], start_lsn=consistent_point)
        kinds: list[bytes] = []
        insert: bytes | None = None
        deadline = time.monotonic() + 30
        while insert is None and time.monotonic() < deadline:
            message = repl.read(timeout=1.0)
            if isinstance(message, XLogData):
                kinds.append(bytes(message.payload[:1]))
                if bytes(message.payload[:1]) == b"I":
                    insert = bytes(message.payload)
                    repl.send_status(write=message.end_lsn, flush=message.end_lsn)
            elif isinstance(message, Keepalive) and message.reply_requested:
                repl.send_status(write=0, flush=0)
        assert insert is not None, f"no Insert message; saw {kinds}"
        assert b"hello replication" in insert
        assert kinds[:2] == [b"B", b"R"]
    finally:
        repl.close()
