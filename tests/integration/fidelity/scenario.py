"""One fidelity scenario: a database (with its own settings or encoding), a table of every
type family, the capture in a thread, and what the log says of the table.

``Scenario.expected`` is the oracle's view of the table (``oracle``), ``Scenario.events``
the table's events wherever its topic is (found by ``source.schema``/``source.table``, so
the topic-name rule does not matter here), ``Scenario.replayed`` the table rebuilt by
applying the log (newest event per key; a truncate empties it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psycopg
from psycopg import sql

from cdc.capture.runner import Capture, CaptureSettings
from cdc.config import load_config
from cdc.log.file import FileLog

from . import oracle as o
from .catalogue import Column


def server_major(dsn: str) -> int:
    """The major version of the server behind ``dsn`` (the catalogue depends on it)."""
    with psycopg.connect(dsn) as conn:
        return conn.info.server_version // 10000


def admin_dsn(server_dsn: str, database: str) -> str:
    return server_dsn.rsplit("/", 1)[0] + f"/{database}"


@dataclass
class Scenario:
    """A database, its pipeline file and log, and the capture running on it."""

    dsn: str
    name: str
    workdir: Path
    _threads: list[tuple[threading.Thread, threading.Event, FileLog]] = field(
        default_factory=list)

    @property
    def log_dir(self) -> Path:
        return self.workdir / "log"

    def sql(self, *statements: str | sql.Composed | sql.SQL) -> None:
        """Run statements in one transaction."""
        with psycopg.connect(self.dsn) as conn:
            for statement in statements:
                conn.execute(statement.encode() if isinstance(statement, str) else statement)

    def write_config(self, extra: str = "") -> Path:
        path = self.workdir / "pipeline.yaml"
        path.write_text(f"""
source:
  dsn: {self.dsn}
  slot: {self.name}
  publication: {self.name}
  heartbeat_interval: 1s
log:
  backend: file
  path: {self.log_dir}
  partitions: 2
{extra}""")
        return path

    def start_capture(self) -> None:
        """The capture in a thread until ``stop``; returns once it streams."""
        config = load_config(self.write_config())
        event_log = FileLog(self.log_dir)
        capture = Capture(config, event_log, CaptureSettings(batch_delay_s=0.01))
        stop = threading.Event()
        thread = threading.Thread(target=capture.run, args=(stop,), daemon=True)
        thread.start()
        self._threads.append((thread, stop, event_log))
        deadline = time.monotonic() + 60
        while capture.stats.sessions == 0:
            assert thread.is_alive(), "the capture stopped while starting"
            assert time.monotonic() < deadline, "the capture did not start streaming"
            time.sleep(0.05)

    def stop(self) -> None:
        for thread, stop, event_log in self._threads:
            stop.set()
            thread.join(timeout=30)
            event_log.close()
        self._threads.clear()

    def events(self, schema: str, table: str) -> list[dict[str, Any]]:
        """The events of ``schema.table`` in source order, from whatever topic holds them."""
        event_log = FileLog(self.log_dir)
        found: list[tuple[Any, dict[str, Any]]] = []
        try:
            topics = [t for t in event_log.admin().topics() if not t.endswith("._schemas")]
            for topic in topics:
                for message in event_log.read_to_end(topic):
                    try:
                        event = orjson.loads(message.value)
                    except orjson.JSONDecodeError:
                        continue
                    source = event.get("source") if isinstance(event, dict) else None
                    if isinstance(source, dict) and (source.get("schema"),
                                                     source.get("table")) == (schema, table):
                        found.append((message.position, event))
        finally:
            event_log.close()
        return [event for _, event in sorted(found, key=lambda item: item[0])]

    def wait_for(self, schema: str, table: str, done: Any, timeout: float = 90.0
                 ) -> list[dict[str, Any]]:
        """Poll the table's events until ``done(events)``; fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            events = self.events(schema, table)
            if done(events):
                return events
            for thread, _, _ in self._threads:
                assert thread.is_alive(), f"the capture stopped; {len(events)} events so far"
            assert time.monotonic() < deadline, (
                f"timed out: {len(events)} events of {schema}.{table}: "
                f"{[e.get('op') for e in events][-10:]}")
            time.sleep(0.3)


def replayed(events: Sequence[dict[str, Any]], key: str) -> dict[Any, dict[str, Any]]:
    """The table the log describes: every event applied in order (``events`` are in source
    order); a truncate empties it; a column listed in ``unchanged`` (TOAST not resent)
    keeps the value it had."""
    state: dict[Any, dict[str, Any]] = {}
    for event in events:
        if event["op"] == "t":
            state.clear()
        elif event["op"] == "d":
            state.pop(event["key"][key], None)
        else:
            row = dict(event["after"])
            previous = state.get(row[key], {})
            for column in event.get("unchanged") or ():
                assert column in previous, f"unchanged {column} of a row the log never had"
                row[column] = previous[column]
            state[row[key]] = row
    return state


def oracle_sql(column: Column) -> sql.Composable:
    """The JSON (as text) PostgreSQL itself gives for the column (see ``oracle``)."""
    ident = sql.Identifier(column.name)
    if column.kind == "text":
        return sql.SQL("to_json({}::text)::text").format(ident)
    bounds = sql.SQL("json_build_object('lower', lower({0}), 'upper', upper({0}), "
                     "'lower_inc', lower_inc({0}), 'upper_inc', upper_inc({0}), "
                     "'empty', isempty({0}))")
    if column.kind == "range":
        return sql.SQL("CASE WHEN {0} IS NULL THEN NULL ELSE ({1})::text END").format(
            ident, bounds.format(ident))
    if column.kind == "rangearray":  # one dimension
        each = bounds.format(sql.Identifier("r"))
        return sql.SQL("CASE WHEN {0} IS NULL THEN NULL ELSE (SELECT coalesce(json_agg("
                       "CASE WHEN r IS NULL THEN NULL ELSE {1} END ORDER BY n), '[]') "
                       "FROM unnest({0}) WITH ORDINALITY AS u(r, n))::text END").format(
                           ident, each)
    if column.kind == "multirange":
        each = bounds.format(sql.Identifier("r"))
        return sql.SQL("CASE WHEN {0} IS NULL THEN NULL ELSE (SELECT coalesce(json_agg({1} "
                       "ORDER BY n), '[]') FROM unnest({0}) WITH ORDINALITY AS u(r, n))::text "
                       "END").format(ident, each)
    return sql.SQL("to_json({})::text").format(ident)


def expected_rows(dsn: str, schema: str, table: str, key: str,
                  cols: Sequence[Column]) -> dict[Any, dict[str, Any]]:
    """The table as the event format represents it, from PostgreSQL's own output."""
    query = sql.SQL("SELECT {}, {} FROM {}.{}").format(
        sql.Identifier(key), sql.SQL(", ").join(oracle_sql(c) for c in cols),
        sql.Identifier(schema), sql.Identifier(table))
    with psycopg.connect(dsn, options=o.ORACLE_OPTIONS) as conn:
        rows = conn.execute(query).fetchall()
    out: dict[Any, dict[str, Any]] = {}
    for row in rows:
        values = {key: row[0]}
        for column, text in zip(cols, row[1:], strict=True):
            values[column.name] = None if text is None else column.convert(o.parse(text))
        out[row[0]] = values
    return out


def mismatches(expected: dict[Any, dict[str, Any]], found: dict[Any, dict[str, Any]],
               what: str) -> list[str]:
    """Every (row, column) whose value differs, with both values."""
    problems = [f"{what}: row {k} missing" for k in expected.keys() - found.keys()]
    problems += [f"{what}: row {k} should not exist" for k in found.keys() - expected.keys()]
    for k in sorted(expected.keys() & found.keys(), key=repr):
        for name, value in expected[k].items():
            got = found[k].get(name, "<absent>")
            if not o.equal(value, got):
                problems.append(f"{what}: row {k} column {name}: expected {value!r}, "
                                f"got {got!r}")
    return problems


def fill(scenario: Scenario, table: sql.Composed, cols: Sequence[Column], ids: Iterator[int],
         rows: int, key: str = "id") -> None:
    """Insert ``rows`` rows: row ``n`` holds each column's ``n``-th literal (else NULL)."""
    names = sql.SQL(", ").join(sql.Identifier(n) for n in [key, *(c.name for c in cols)])
    statements: list[sql.Composed] = []
    for n in range(rows):
        values: list[sql.Composable] = [sql.Literal(next(ids))]
        for c in cols:
            literal = c.literals[n] if n < len(c.literals) else "NULL"
            values.append(sql.SQL("({})::{}").format(sql.SQL(literal), sql.SQL(c.sql_type)))
        statements.append(sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            table, names, sql.SQL(", ").join(values)))
    scenario.sql(*statements)


def create_table(scenario: Scenario, schema: str, table: str, cols: Sequence[Column],
                 key: str = "id") -> sql.Composed:
    """``schema.table`` (key ``int`` primary key, one column per catalogue entry);
    REPLICA IDENTITY FULL so updates and deletes carry the old row."""
    name = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(table))
    defs = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(c.sql_type))
                              for c in cols)
    scenario.sql(sql.SQL("CREATE TABLE {} ({} int PRIMARY KEY, {})").format(
        name, sql.Identifier(key), defs),
        sql.SQL("ALTER TABLE {} REPLICA IDENTITY FULL").format(name))
    return name
