"""Schema changes in the middle of a stream, with concurrent writes, checked event by event.

Each test runs DDL while a writer thread keeps inserting rows; every event must carry
exactly the columns of its ``schema_version`` (as recorded on ``<prefix>._schemas``), the
values the writer wrote, and no event may be lost, duplicated or invented (a table
rewrite by ALTER must not produce events).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import psycopg
from psycopg import sql

from cdc.capture.lsn import parse_lsn
from cdc.capture.runner import Capture
from cdc.capture.source.messages import sends_messages
from cdc.log import StartAt
from cdc.log.file import FileLog

from .conftest import CaptureEnv, server_version
from .snapshot_check import use_config, wait_state


class Writer:
    """Inserts ``(id, a = id * 10)`` rows one transaction each until stopped.

    After a RENAME TABLE it goes on writing under the new name (``rename_to``)."""

    def __init__(self, dsn: str, table: str, first_id: int = 1) -> None:
        self.dsn = dsn
        self.table = table
        self.next_id = first_id
        self.written: list[tuple[str, int]] = []
        self.rename_to: str | None = None
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                while not self._stop.is_set():
                    try:
                        conn.execute(sql.SQL("INSERT INTO {} (id, a) VALUES (%s, %s)").format(
                            sql.Identifier(self.table)), (self.next_id, self.next_id * 10))
                    except psycopg.errors.UndefinedTable:
                        assert self.rename_to is not None, f"{self.table} vanished"
                        self.table = self.rename_to
                        continue
                    self.written.append((self.table, self.next_id))
                    self.next_id += 1
                    time.sleep(0.002)
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def wait_rows(self, count: int) -> None:
        """Wait until ``count`` more rows were written."""
        target = len(self.written) + count
        deadline = time.monotonic() + 30
        while len(self.written) < target:
            assert self.error is None, self.error
            assert time.monotonic() < deadline, "the writer stalled"
            time.sleep(0.01)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert self.error is None, self.error


@contextmanager
def writing(env: CaptureEnv, table: str) -> Iterator[Writer]:
    """A running writer for the duration of the block."""
    writer = Writer(env.dsn, table)
    writer.start()
    try:
        writer.wait_rows(10)
        yield writer
    finally:
        writer.stop()


def schema_records(env: CaptureEnv) -> list[dict[str, Any]]:
    """The records of ``<prefix>._schemas``, in log order."""
    log = FileLog(env.log_dir)
    topic = f"{env.slot}._schemas"
    if topic not in log.admin().topics():
        return []
    consumer = log.consumer(f"check-{time.monotonic_ns()}", topics=[topic],
                            start=StartAt.earliest())
    out: list[dict[str, Any]] = []
    try:
        while batch := consumer.poll(10_000, timeout=0.3):
            out.extend(orjson.loads(m.value) for m in batch)
    finally:
        consumer.close()
        log.close()
    return out


def versions_of(env: CaptureEnv, table: str) -> dict[int, dict[str, Any]]:
    """Schema version → schema record of ``public.<table>``."""
    return {r["schema_version"]: r for r in schema_records(env) if r["table"] == table}


def wait_events(env: CaptureEnv, table: str, count: int) -> list[dict[str, Any]]:
    """The table's events once there are at least ``count``; exactly ``count`` expected."""
    events = [orjson.loads(m.value) for m in env.wait_for(table, count)]
    time.sleep(0.5)  # anything beyond count would be a duplicate or an invented event
    events = env.values(table)
    assert len(events) == count, f"{len(events)} events on {table}, expected {count}"
    return events


def replay(events: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The table's rows after applying ``events`` in log order."""
    state: dict[int, dict[str, Any]] = {}
    for event in events:
        if event["op"] == "d":
            state.pop(event["key"]["id"], None)
        elif event["op"] in ("c", "u", "r"):
            state[event["key"]["id"]] = event["after"]
    return state


def wait_replayed(env: CaptureEnv, table: str,
                  expected: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The table's events once replaying them gives ``expected`` (or fail)."""
    deadline = time.monotonic() + 60
    while True:
        events = env.values(table)
        if replay(events) == expected:
            return events
        assert time.monotonic() < deadline, f"{table} does not replay to the table"
        time.sleep(0.3)


def assert_in_commit_order(events: list[dict[str, Any]]) -> None:
    positions = [(parse_lsn(e["source"]["commit_lsn"]), e["source"]["seq"]) for e in events]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    for earlier, later in itertools.pairwise(events):
        assert earlier["schema_version"] <= later["schema_version"], (
            "schema versions go back in commit order", earlier, later)


def assert_columns_match_versions(events: list[dict[str, Any]],
                                  versions: dict[int, dict[str, Any]]) -> None:
    """Each event's row holds exactly the columns of its schema version."""
    for event in events:
        record = versions[event["schema_version"]]
        names = [c["name"] for c in record["columns"]]
        row = event["after"] if event["after"] is not None else event["key"]
        present = list(row) + event["unchanged"]
        if event["after"] is not None:
            assert sorted(present) == sorted(names), (event, names)


def columns(record: dict[str, Any]) -> list[tuple[str, str, bool]]:
    return [(c["name"], c["type"], c["key"]) for c in record["columns"]]


def test_add_and_drop_columns_mid_stream(capture_env: CaptureEnv,
                                         run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    env.sql("CREATE TABLE t (id int PRIMARY KEY, a int)")
    use_config(env, schema_changes="{default: ignore}")  # no re-reads
    run_capture()
    with writing(env, "t") as writer:
        env.sql("ALTER TABLE t ADD COLUMN b text")  # no default
        env.sql("UPDATE t SET b = 'b' || id WHERE id = 1")
        writer.wait_rows(10)
        env.sql("ALTER TABLE t ADD COLUMN c int NOT NULL DEFAULT 7")  # stored default
        env.sql("UPDATE t SET a = a WHERE id = 2")
        writer.wait_rows(10)
        env.sql("ALTER TABLE t ADD COLUMN d timestamptz DEFAULT clock_timestamp()")  # rewrite
        env.sql("UPDATE t SET a = a WHERE id = 3")
        writer.wait_rows(10)
        env.sql("ALTER TABLE t DROP COLUMN b")
        env.sql("UPDATE t SET a = -1 WHERE id = 1")
        writer.wait_rows(10)
    inserted = [i for _, i in writer.written]
    events = wait_events(env, "t", len(inserted) + 4)
    assert_in_commit_order(events)

    versions = versions_of(env, "t")
    assert sorted(versions) == [1, 2, 3, 4, 5]
    int4, text, tstz = "pg_catalog.int4", "pg_catalog.text", "pg_catalog.timestamptz"
    assert columns(versions[1]) == [("id", int4, True), ("a", int4, False)]
    assert columns(versions[2]) == [*columns(versions[1]), ("b", text, False)]
    assert columns(versions[3]) == [*columns(versions[2]), ("c", int4, False)]
    assert columns(versions[4]) == [*columns(versions[3]), ("d", tstz, False)]
    assert columns(versions[5]) == [("id", int4, True), ("a", int4, False), ("c", int4, False),
                                    ("d", tstz, False)]
    assert_columns_match_versions(events, versions)

    creates = [e for e in events if e["op"] == "c"]
    assert [e["key"]["id"] for e in creates] == inserted, "every insert once, in order"
    for event in creates:
        after, version = event["after"], event["schema_version"]
        assert after["a"] == after["id"] * 10
        if version >= 2 and "b" in after:
            assert after["b"] is None
        if version >= 3:
            assert after["c"] == 7
        if version >= 4:
            assert isinstance(after["d"], str) and after["d"].endswith("Z")
    updates = [e for e in events if e["op"] == "u"]
    assert [(u["key"]["id"], u["schema_version"]) for u in updates] == [
        (1, 2), (2, 3), (3, 4), (1, 5)]
    assert updates[0]["after"] == {"id": 1, "a": 10, "b": "b1"}
    assert updates[1]["after"] == {"id": 2, "a": 20, "b": None, "c": 7}
    assert updates[2]["after"]["c"] == 7 and updates[2]["after"]["d"].endswith("Z")
    assert "b" not in updates[3]["after"] and updates[3]["after"]["a"] == -1
    # every version's first event comes after its schema record was written
    first_of: dict[int, dict[str, Any]] = {}
    for event in events:
        first_of.setdefault(event["schema_version"], event)
    assert sorted(first_of) == [1, 2, 3, 4, 5]


def test_alter_column_types_mid_stream(capture_env: CaptureEnv,
                                       run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    env.sql("CREATE TABLE ty (id int PRIMARY KEY, a int, s text, amount numeric(10,2),"
            " code int, body text)",
            "ALTER TABLE ty ALTER COLUMN body SET STORAGE EXTERNAL",
            "INSERT INTO ty VALUES (-1, 0, 'short', 12.5, 42, repeat('x', 100000))")
    use_config(env, schema_changes="{default: ignore}")  # no re-reads
    run_capture()
    steps = [
        ("ALTER TABLE ty ALTER COLUMN a TYPE bigint", "UPDATE ty SET a = 1099511627776 "
         "WHERE id = -1"),
        ("ALTER TABLE ty ALTER COLUMN s TYPE varchar(20)", "UPDATE ty SET s = 'shorter' "
         "WHERE id = -1"),
        ("ALTER TABLE ty ALTER COLUMN amount TYPE numeric(14,4)", "UPDATE ty SET a = a + 1 "
         "WHERE id = -1"),
        ("ALTER TABLE ty ALTER COLUMN code TYPE text USING code::text || '!'",
         "UPDATE ty SET a = a + 1 WHERE id = -1"),
        ("ALTER TABLE ty ALTER COLUMN body TYPE varchar", "UPDATE ty SET a = a + 1 "
         "WHERE id = -1"),
    ]
    with writing(env, "ty") as writer:
        for ddl, update in steps:
            env.sql(ddl)
            env.sql(update)
            writer.wait_rows(8)
    inserted = [i for _, i in writer.written]
    events = wait_events(env, "ty", 1 + len(inserted) + len(steps))
    assert events[0]["op"] == "r" and events[0]["schema_version"] == 1  # initial snapshot
    assert events[0]["after"]["body"] == "x" * 100_000
    events = events[1:]
    assert_in_commit_order(events)
    versions = versions_of(env, "ty")
    assert sorted(versions) == [1, 2, 3, 4, 5, 6]
    types = {v: {c["name"]: (c["type"], c["type_modifier"]) for c in r["columns"]}
             for v, r in versions.items()}
    assert types[1]["a"] == ("pg_catalog.int4", -1)
    assert types[2]["a"] == ("pg_catalog.int8", -1)
    assert types[2]["s"] == ("pg_catalog.text", -1)
    assert types[3]["s"] == ("pg_catalog.varchar", 24)  # 20 + VARHDRSZ
    assert types[3]["amount"] == ("pg_catalog.numeric", ((10 << 16) | 2) + 4)
    assert types[4]["amount"] == ("pg_catalog.numeric", ((14 << 16) | 4) + 4)
    assert types[4]["code"][0] == "pg_catalog.int4"
    assert types[5]["code"][0] == "pg_catalog.text"
    assert types[6]["body"][0] == "pg_catalog.varchar"
    assert_columns_match_versions(events, versions)

    updates = [e for e in events if e["op"] == "u"]
    assert [u["schema_version"] for u in updates] == [2, 3, 4, 5, 6]
    assert updates[0]["after"]["a"] == 1099511627776  # an integer, not text
    assert updates[1]["after"]["s"] == "shorter"
    assert updates[2]["after"]["amount"] == "12.5000"  # the new scale, every digit
    assert updates[3]["after"]["code"] == "42!" and updates[3]["after"]["amount"] == "12.5000"
    for changed in updates:  # the TOASTed body was never resent, whatever the rewrites
        assert changed["unchanged"] == ["body"] and "body" not in changed["after"]
    creates = [e for e in events if e["op"] == "c"]
    assert [e["key"]["id"] for e in creates] == inserted
    for event in creates:
        after, version = event["after"], event["schema_version"]
        assert after["a"] == after["id"] * 10 and isinstance(after["a"], int)
        assert after["code"] is None and after["amount"] is None
        if version >= 5:
            assert "code" in after


def test_rename_column_and_table_mid_stream(capture_env: CaptureEnv,
                                            run_capture: Callable[[], Capture]) -> None:
    env = capture_env
    env.sql("CREATE TABLE r (id int PRIMARY KEY, a int, label text)")
    with psycopg.connect(env.dsn) as conn:
        oid = conn.execute("SELECT 'r'::regclass::oid").fetchone()
    assert oid is not None
    use_config(env, schema_changes="{default: ignore}")  # no re-reads
    run_capture()
    with writing(env, "r") as writer:
        env.sql("ALTER TABLE r RENAME COLUMN label TO title")
        env.sql("UPDATE r SET title = 'one' WHERE id = 1")
        writer.wait_rows(10)
        writer.rename_to = "r2"
        env.sql("ALTER TABLE r RENAME TO r2")
        env.sql("UPDATE r2 SET title = 'uno' WHERE id = 1")
        writer.wait_rows(10)
    old = [i for table, i in writer.written if table == "r"]
    new = [i for table, i in writer.written if table == "r2"]
    assert old and new
    before = wait_events(env, "r", len(old) + 1)
    with psycopg.connect(env.dsn) as conn:
        rows = conn.execute("SELECT id, a, title FROM r2").fetchall()
    final = {i: {"id": i, "a": a, "title": t} for i, a, t in rows}
    messages = sends_messages(server_version(env.dsn))
    if messages:
        after = wait_replayed(env, "r2", final)
    else:  # PostgreSQL 13: no snapshot into the new topic (no watermarks): it fails,
        # saying so, and the two topics together hold the table
        failed = wait_state(env, "public.r2", "failed", timeout=30)
        assert failed.reason is not None and failed.reason.startswith("PostgreSQL 13: ")
        after = wait_events(env, "r2", len(new) + 1)  # the inserts and the update
        replayed = replay(before + after)  # rows written before the column's rename
        assert {i: (r["a"], r.get("title")) for i, r in replayed.items()} == {  # have label
            i: (r["a"], r["title"]) for i, r in final.items()}
    assert_in_commit_order(before)
    assert_in_commit_order([e for e in after if e["op"] != "r"])

    versions = versions_of(env, "r")
    assert sorted(versions) == [1, 2]
    assert [c["name"] for c in versions[1]["columns"]] == ["id", "a", "label"]
    assert [c["name"] for c in versions[2]["columns"]] == ["id", "a", "title"]
    renamed = versions_of(env, "r2")
    assert sorted(renamed) == [3], "the numbering goes on under the new name"
    assert renamed[3]["renamed_from"] == "public.r"
    assert renamed[3]["relation_oid"] == versions[2]["relation_oid"] == int(oid[0])
    assert [c["name"] for c in renamed[3]["columns"]] == ["id", "a", "title"]
    assert_columns_match_versions(before, versions)
    assert_columns_match_versions(after, renamed)

    assert [e["key"]["id"] for e in before if e["op"] == "c"] == old
    assert [e["key"]["id"] for e in after if e["op"] == "c"] == new
    # the renamed table was new to the publication by name: it was snapshotted into its
    # new topic, so that topic alone holds every row
    reads = {e["key"]["id"] for e in after if e["op"] == "r"}
    assert reads >= set(old) if messages else reads == set()
    assert all(e["source"]["table"] == "r" for e in before)
    assert all(e["source"]["table"] == "r2" for e in after)
    label_update = next(e for e in before if e["op"] == "u")
    assert label_update["after"] == {"id": 1, "a": 10, "title": "one"}
    assert label_update["schema_version"] == 2
    assert all("label" in e["after"] for e in before if e["schema_version"] == 1)
    title_update = next(e for e in after if e["op"] == "u")
    assert title_update["after"] == {"id": 1, "a": 10, "title": "uno"}
    assert title_update["schema_version"] == 3

