"""Every catalog query the capture runs while streaming outlasts DDL on the tables it
looks at: a ``DROP TABLE`` at the wrong moment once stopped the capture
(``could not open relation with OID …`` from ``pg_publication_tables``, PostgreSQL 16).

``Churn`` runs DDL in a tight loop — tables created, filled, altered, renamed and dropped,
a composite type created and dropped — while each streaming-time catalog read runs in a
loop beside it, and then while a whole capture streams for ``DISTRIBUTARY_DDL_RACE_S``
seconds (a minute by default) with its periodic checks every half second.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import psycopg
import pytest
from psycopg import sql

from cdc.capture.pgoutput import Column, Relation
from cdc.capture.runner import Capture, CaptureSettings
from cdc.capture.schema.shapes import ShapeRegistry
from cdc.capture.schema.topics import published_tables
from cdc.capture.snapshot.catalog import published_table
from cdc.capture.source import session
from cdc.capture.source.ddl_race import outlast_ddl
from cdc.capture.source.publication import (
    published_relations,
    sync_publication,
    tables_added_by_name,
)
from cdc.capture.source.slot import check_slot_health, primary_key
from cdc.capture.source.visibility import transaction_visible, wait_until_visible

from .conftest import CaptureEnv
from .snapshot_check import use_config

RACE_S = float(os.environ.get("DISTRIBUTARY_DDL_RACE_S", "60"))
QUERY_RACE_S = 4.0
PATTERNS = "['public.*', '!public.skip_*']"  # new tables join the publication by name


class Churn:
    """DDL in a tight loop on its own connection (see the module docstring), in a thread
    for as long as a ``with`` block; ``rounds`` counts the completed rounds."""

    def __init__(self, dsn: str, publication: str | None = None) -> None:
        self.dsn = dsn
        self.publication = publication  # add each new table to it by name
        self.rounds = 0
        self.deadlocks = 0  # lost to a lock clash with the capture's ALTER PUBLICATION
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Churn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.check()

    def check(self) -> None:
        """Fail the test if the DDL loop itself failed (it then stops churning)."""
        assert self.error is None, f"the DDL loop itself failed: {self.error!r}"

    def _run(self) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                while not self._stop.is_set():
                    try:
                        self._round(conn, self.rounds % 3)
                    except (psycopg.errors.DeadlockDetected, psycopg.errors.LockNotAvailable):
                        self.deadlocks += 1
                        self._clean(conn, self.rounds % 3)
                    self.rounds += 1
        except BaseException as exc:
            self.error = exc

    @staticmethod
    def _names(n: int) -> tuple[sql.Identifier, sql.Identifier, sql.Identifier]:
        return (sql.Identifier(f"churn_{n}"), sql.Identifier(f"churn_{n}_renamed"),
                sql.Identifier(f"churn_type_{n}"))

    def _round(self, conn: psycopg.Connection[Any], n: int) -> None:
        table, renamed, kind = self._names(n)
        joins = ("ALTER PUBLICATION {publication} ADD TABLE {table}",) \
            if self.publication else ()
        for statement in (
                "CREATE TYPE {kind} AS (a int, b text)",
                "CREATE TABLE {table} (id int PRIMARY KEY, v text, c {kind})",
                *joins,
                "INSERT INTO {table} SELECT g, 'v' || g, ROW(g, 'b')::{kind}"
                " FROM generate_series(1, 20) g",
                "ALTER TABLE {table} ADD COLUMN extra int NOT NULL DEFAULT 1",
                "ALTER TABLE {table} ALTER COLUMN v TYPE varchar(40)",
                "UPDATE {table} SET v = 'updated' WHERE id = 1",
                "ALTER TABLE {table} DROP COLUMN extra",
                "ALTER TABLE {table} RENAME TO {renamed}",
                "DROP TABLE {renamed}",
                "DROP TYPE {kind}"):
            conn.execute(sql.SQL(statement).format(
                table=table, renamed=renamed, kind=kind,
                publication=sql.Identifier(self.publication or "")))

    def _clean(self, conn: psycopg.Connection[Any], n: int) -> None:
        table, renamed, kind = self._names(n)
        for statement in ("DROP TABLE IF EXISTS {table}", "DROP TABLE IF EXISTS {renamed}",
                          "DROP TYPE IF EXISTS {kind}"):
            conn.execute(sql.SQL(statement).format(table=table, renamed=renamed, kind=kind))


@pytest.fixture
def raced(capture_env: CaptureEnv) -> Iterator[CaptureEnv]:
    """The test's database: a table nobody drops, and the capture's publication (named
    like the slot) holding it."""
    env = capture_env
    env.sql("CREATE TABLE steady (id bigint PRIMARY KEY, v text)",
            "CREATE TABLE skip_me (id int PRIMARY KEY)")
    with psycopg.connect(env.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE steady").format(
            sql.Identifier(env.slot)))
    yield env


def _reads(env: CaptureEnv) -> dict[str, Callable[[psycopg.Connection[Any]], object]]:
    """The capture's streaming-time catalog reads, called as the capture calls them."""
    pub, slot = env.slot, env.slot

    def shapes(conn: psycopg.Connection[Any]) -> object:
        registry = ShapeRegistry(conn, env.slot)  # each time: every type read again
        oids = [int(r[0]) for r in conn.execute(
            "SELECT reltype FROM pg_class WHERE relname LIKE 'churn\\_%' AND relkind = 'r'")]
        columns = tuple(Column(False, f"c{i}", oid, -1) for i, oid in enumerate(oids))
        return registry.learn(Relation(1, "public", "steady", "f", columns))

    def keys(conn: psycopg.Connection[Any]) -> object:
        return [primary_key(conn, int(r[0])) for r in conn.execute(
            "SELECT oid FROM pg_class WHERE relname LIKE 'churn\\_%' AND relkind = 'r'")]

    def published(conn: psycopg.Connection[Any]) -> object:  # as an incremental chunk
        return outlast_ddl(lambda: published_table(conn, "public", "steady", pub),
                           what="reading the columns of public.steady")

    return {
        "publication tables": lambda conn: published_tables(conn, pub),
        "publication relations": lambda conn: published_relations(conn, pub),
        "tables added by name": lambda conn: tables_added_by_name(conn, pub),
        "publication sync": lambda conn: sync_publication(conn, pub, ("public.*",
                                                                      "!public.skip_*")),
        "types and keys": shapes,
        "primary key": keys,
        "column lists and row filters": published,
        "slot health": lambda conn: check_slot_health(conn, slot),
    }


@pytest.mark.parametrize("read", ["publication tables", "publication relations",
                                  "tables added by name", "publication sync",
                                  "types and keys", "primary key",
                                  "column lists and row filters", "slot health"])
def test_a_catalog_read_outlasts_ddl(raced: CaptureEnv, read: str,
                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="cdc")
    call = _reads(raced)[read]
    reads = 0
    if read == "slot health":
        with psycopg.connect(raced.dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')",
                         (raced.slot,))
    # the churned tables join the publication by name (but not where the sync adds them)
    joins = None if read == "publication sync" else raced.slot
    with session.connect(raced.dsn) as conn, Churn(raced.dsn, joins) as churn:
        deadline = time.monotonic() + QUERY_RACE_S
        while time.monotonic() < deadline or (churn.rounds < 5
                                               and time.monotonic() < deadline + 60):
            churn.check()
            call(conn)  # raises if the race reached the caller
            reads += 1
    assert churn.rounds >= 5 and reads >= 5, (churn.rounds, reads)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [], "a read gave up (or degraded) under DDL"


def test_the_capture_streams_on_through_a_minute_of_ddl(raced: CaptureEnv) -> None:
    env = raced
    use_config(env, tables=PATTERNS)
    capture = Capture(env.config, env.open_log(), CaptureSettings(
        batch_delay_s=0.01, source_check_s=0.5, new_tables_check_s=0.5))
    failure: list[BaseException] = []

    def run(stop: threading.Event) -> None:
        try:
            capture.run(stop)
        except BaseException as exc:
            failure.append(exc)

    stop = threading.Event()
    thread = threading.Thread(target=run, args=(stop,), daemon=True)
    thread.start()
    written = 0
    try:
        with psycopg.connect(env.dsn, autocommit=True) as writer, Churn(env.dsn) as churn:
            deadline = time.monotonic() + RACE_S
            while time.monotonic() < deadline and thread.is_alive():
                churn.check()
                written += 1
                writer.execute("INSERT INTO steady VALUES (%s, 'row')", (written,))
                time.sleep(0.01)  # a steady trickle beside the DDL, not a load test
        assert not failure, f"the capture stopped: {failure[0]!r}"
        assert thread.is_alive()
        assert churn.rounds >= 10, churn.rounds
        events = env.wait_for("steady", written, timeout=60)
    finally:
        stop.set()
        thread.join(timeout=60)
        capture.log.close()
    ids = [orjson.loads(m.value)["after"]["id"] for m in events]
    assert ids == list(range(1, written + 1)), "lost, repeated or reordered under DDL"
    assert capture.stats.sessions == 1, "a catalog read ended the session"


def test_a_running_transaction_is_not_visible_until_it_ends(capture_env: CaptureEnv) -> None:
    with psycopg.connect(capture_env.dsn) as writer, \
            psycopg.connect(capture_env.dsn, autocommit=True) as reader:
        row = writer.execute("SELECT pg_catalog.pg_current_xact_id()::text").fetchone()
        assert row is not None
        xid = int(row[0]) % (1 << 32)
        assert not transaction_visible(reader, xid)
        assert not wait_until_visible(reader, xid, budget_s=0.05)
        writer.commit()
        assert transaction_visible(reader, xid) and wait_until_visible(reader, xid)
