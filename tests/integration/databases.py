"""Removing a test's database: its sessions, its replication slots, then the database."""

from __future__ import annotations

import time

import psycopg
from psycopg import sql


def drop_database(admin_dsn: str, name: str, wait_s: float = 30.0) -> None:
    """Terminate the sessions of database ``name``, drop its replication slots as they
    become free, then drop it. A terminated walsender marks its slot inactive only once it
    has exited, and ``DROP DATABASE`` refuses while a slot is active, even ``WITH
    (FORCE)``: the slots are waited for up to ``wait_s``."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        deadline = time.monotonic() + wait_s
        while True:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                         " WHERE database = %s AND NOT active", (name,))
            left = conn.execute("SELECT 1 FROM pg_replication_slots WHERE database = %s",
                                (name,)).fetchone()
            if left is None or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                     .format(sql.Identifier(name)))
