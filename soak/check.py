"""The checks at the end of a soak, while the pipeline still runs.

The log has had retention and compaction acting on it, so it no longer holds every
change; what must still hold:

- in each partition, source positions strictly increase: a position seen again is a
  ``duplicated`` record, one going back ``diverged`` (misordered);
- the log replayed in order equals each final table (the workload touches every row
  often enough that its newest event is still there): a row of the table missing from
  the replay is ``lost``, a row extra or different ``diverged``. A TOAST column the
  newest event left unchanged whose earlier value was compacted away cannot be compared
  (counted as ``unresolved``); ``placed_at`` is left out (a timestamp's text is the
  codecs' business, tested with them), numerics are compared as decimals and ``doc`` by
  its md5;
- ``cdc reconcile`` of both sinks against PostgreSQL: ``missing`` rows are lost, ``extra``
  and ``different`` ones diverged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson
import psycopg
from psycopg import sql

from cdc.capture.lsn import parse_lsn
from cdc.config import PipelineConfig
from cdc.log import Log, Message
from connectors.reconcile.check import describe_failure, reconcile_pipeline

from .schema import TABLES

Row = dict[str, Any]
LEFT_OUT = frozenset({"placed_at"})


@dataclass
class Findings:
    """What the checks found; ``problems`` keeps a few examples."""

    records: int = 0
    lost: int = 0
    duplicated: int = 0
    diverged: int = 0
    unresolved: int = 0
    reconcile_line: str = "reconcile: not run"
    problems: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if len(self.problems) < 30:
            self.problems.append(text)


def comparable(row: Row) -> Row:
    """A row as the checks compare it (see the module docstring)."""
    out: Row = {}
    for column, value in row.items():
        if column in LEFT_OUT:
            continue
        if column == "doc" and value is not None:
            value = hashlib.md5(value.encode(), usedforsecurity=False).hexdigest()
        elif isinstance(value, (int, float, str)) and column in ("amount",):
            value = Decimal(str(value))
        out[column] = value
    return out


@dataclass
class Replay:
    """One topic replayed: rows by key, and the columns of each still unknown."""

    rows: dict[str, Row] = field(default_factory=dict)
    unknown: dict[str, frozenset[str]] = field(default_factory=dict)

    def apply(self, event: Row) -> None:
        key = orjson.dumps(event["key"], option=orjson.OPT_SORT_KEYS).decode()
        op = event["op"]
        if op == "t":
            self.rows.clear()
            self.unknown.clear()
        elif op == "d":
            self.rows.pop(key, None)
            self.unknown.pop(key, None)
        elif event["after"] is not None:
            image = comparable(event["after"])
            previous = self.rows.get(key)
            missing = set()
            for column in event.get("unchanged") or ():
                if previous is not None and column in previous:
                    image[column] = previous[column]
                    if column in self.unknown.get(key, ()):
                        missing.add(column)
                else:
                    missing.add(column)
            self.rows[key] = image
            if missing:
                self.unknown[key] = frozenset(missing)
            else:
                self.unknown.pop(key, None)


def check_topic(table: str, messages: Iterable[Message], want: dict[str, Row],
                findings: Findings) -> None:
    """Positions and the replay of one table's topic against the table's rows."""
    replay = Replay()
    last: dict[int, tuple[int, int]] = {}
    for message in messages:
        findings.records += 1
        event = orjson.loads(message.value)
        source = event["source"]
        position = (parse_lsn(source["commit_lsn"]), int(source["seq"]))
        previous = last.get(message.partition)
        if previous is not None and position <= previous:
            if position == previous:
                findings.duplicated += 1
            else:
                findings.diverged += 1
            findings.note(f"{table}[{message.partition}]@{message.offset}: position "
                          f"{position} not after {previous}")
            continue
        last[message.partition] = position
        replay.apply(event)
    got = replay.rows
    for key in want.keys() - got.keys():
        findings.lost += 1
        findings.note(f"{table} {key}: in the table, not in the log's replay")
    for key in got.keys() - want.keys():
        findings.diverged += 1
        findings.note(f"{table} {key}: in the log's replay, not in the table")
    for key in want.keys() & got.keys():
        unknown = replay.unknown.get(key, frozenset())
        findings.unresolved += len(unknown)
        expected = {c: v for c, v in want[key].items() if c not in unknown}
        actual = {c: v for c, v in got[key].items() if c not in unknown}
        if expected != actual:
            findings.diverged += 1
            findings.note(f"{table} {key}: log {actual} != table {expected}")


def table_rows(dsn: str, table: str) -> dict[str, Row]:
    """The table's rows by their key as the log writes it (``{"id": …}``)."""
    query = sql.SQL("SELECT to_jsonb(t) FROM {} t").format(sql.Identifier(table))
    rows: dict[str, Row] = {}
    with psycopg.connect(dsn) as conn:
        for (row,) in conn.execute(query):
            rows[orjson.dumps({"id": row["id"]}).decode()] = comparable(row)
    return rows


def reconcile_sinks(config: PipelineConfig, findings: Findings) -> None:
    """``cdc reconcile`` of every sink, its differences counted (see the docstring)."""
    lines: list[str] = []
    try:
        summary = reconcile_pipeline(config, report=lines.append)
    except Exception as exc:
        findings.diverged += 1
        findings.reconcile_line = f"reconcile: could not finish: {describe_failure(exc)}"
        findings.note(findings.reconcile_line)
        return
    findings.lost += summary.counts["missing"]
    findings.diverged += summary.counts["extra"] + summary.counts["different"]
    findings.reconcile_line = summary.line()
    for line in lines[:10]:
        findings.note(f"reconcile: {line}")


def check_all(dsn: str, event_log: Log, config: PipelineConfig) -> Findings:
    """Every check of the module docstring."""
    findings = Findings()
    reconcile_sinks(config, findings)
    topics = set(event_log.admin().topics())
    for table in TABLES:
        topic = config.topic_for("public", table)
        messages = event_log.read_to_end(topic) if topic in topics else iter(())
        check_topic(table, messages, table_rows(dsn, table), findings)
    return findings
