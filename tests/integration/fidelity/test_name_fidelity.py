"""Quoted, mixed-case, non-ASCII and 63-byte schema, table and column names: every row
arrives, through the snapshot and the stream, under its real names (``source.schema``,
``source.table``, the column names in ``after``), and applying the log reproduces each
table."""

from __future__ import annotations

import contextlib
import itertools
import re
from typing import Any

from psycopg import sql

from cdc.log.file import FileLog

from . import oracle as o
from .catalogue import Column
from .conftest import MakeScenario
from .scenario import create_table, expected_rows, fill, mismatches, replayed

LONG_63 = "t" * 51 + "_sixty_three"  # 63 bytes, PostgreSQL's limit (NAMEDATALEN - 1)
NON_ASCII_63 = "é" * 31 + "x"  # 63 bytes of UTF-8 in 32 characters
TABLES = [("Sales Dept", "Order Items"), ("public", "MixedCase"), ("public", "lower.dot"),
          ("public", 'quo"te'), ("Ünïcødé", "Bestellungen_äöü"), ("public", LONG_63),
          ("public", NON_ASCII_63), ("public", "日本の表")]
KEY = "Row ID"
COLUMNS = [Column("Column With Space", "text", ("'a'", "'ü'"), o.same),
           Column("MiXeD", "int4", ("1", "-1"), o.integer),
           Column("c" * 63, "numeric", ("'1.50'", "'NaN'"), o.numeric),
           Column("ÄÖÜ_" + "ß" * 28, "jsonb", ("'[1]'", """'{"k": "v"}'"""), o.json_value),
           Column('a"b.c', "timestamptz", ("'2024-01-01 00:00:00+00'", "'infinity'"),
                  o.timestamptz)]


def test_odd_names_through_snapshot_and_stream(make_scenario: MakeScenario) -> None:
    scenario = make_scenario(types=False)
    for schema in {schema for schema, _ in TABLES} - {"public"}:
        scenario.sql(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    names = {}
    for schema, table in TABLES:
        assert len(table.encode()) <= 63, table
        names[schema, table] = create_table(scenario, schema, table, COLUMNS, key=KEY)
        fill(scenario, names[schema, table], COLUMNS, itertools.count(1), 2, key=KEY)
    scenario.start_capture()
    for schema, table in TABLES:
        fill(scenario, names[schema, table], COLUMNS, itertools.count(3), 2, key=KEY)
    def complete(events: list[dict[str, Any]]) -> bool:
        return len(events) >= 4

    last = TABLES[-1]
    with contextlib.suppress(AssertionError):  # reported below, table by table
        scenario.wait_for(*last, complete, timeout=30)
    problems: list[str] = []
    for schema, table in TABLES:
        events = scenario.events(schema, table)
        ops = sorted(e["op"] for e in events)
        if ops != ["c", "c", "r", "r"]:
            problems.append(f"{schema}.{table}: events {ops}, expected 2 snapshot reads "
                            "and 2 inserts")
        expected = expected_rows(scenario.dsn, schema, table, KEY, COLUMNS)
        problems += mismatches(expected, replayed(events, KEY), f"{schema}.{table}")
    event_log = FileLog(scenario.log_dir)
    try:
        topics = event_log.admin().topics()
    finally:
        event_log.close()
    problems += [f"topic {t!r} is not a valid Kafka topic name" for t in topics
                 if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", t)]
    assert not problems, "\n".join(problems)
