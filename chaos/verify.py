"""The checks at the end of a chaos run.

Log against the audit table, per table and key: every committed change exactly once
(``lost``: in the audit, not in the log; ``duplicated``: in the log more often than
committed), in commit order (the same sequence of (txid, op) per key), with the
committed row image; source positions strictly increasing per partition. Snapshot reads
(``r``) are not changes: the log replayed by position (reads included) must equal each
final table, so a row deleted while a snapshot was interrupted cannot survive in it.
The sinks against the final tables: ``cdc reconcile``'s own check (``reconcile_pipeline``),
while the pipeline still runs (its rechecks wait for the capture and the connectors).
``diverged``: rows missing, extra or different in the log's replay, and records the
reconcile reports, plus keys out of order and wrong row images in the log. Either
backend: the log is read through ``cdc.log``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import psycopg

from cdc.capture.lsn import parse_lsn
from cdc.config import PipelineConfig
from cdc.log import Log, Message
from connectors.reconcile.check import Summary, describe_failure, reconcile_pipeline

from .schema import TABLES, body_digest, table_rows

TRUNCATE_KEY = "{}"
Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Change:
    """One change of one key: its transaction, kind and row image (``None`` for d/t)."""

    txid: int
    op: str
    image: Row | None
    unchanged: tuple[str, ...] = ()


@dataclass
class Findings:
    """What the checks found; ``problems`` holds a few examples of each kind."""

    committed: int = 0
    logged: int = 0
    lost: int = 0
    duplicated: int = 0
    misordered: int = 0
    wrong_images: int = 0
    sink_rows_diverged: int = 0
    log_rows_diverged: int = 0  # the log replayed against the final tables
    dead_letters: int = 0
    reconcile_summary: str = ""  # the summary line of the sinks' reconcile
    problems: list[str] = field(default_factory=list)

    @property
    def diverged(self) -> int:
        return (self.misordered + self.wrong_images + self.sink_rows_diverged
                + self.log_rows_diverged)

    def note(self, text: str) -> None:
        if len(self.problems) < 40:
            self.problems.append(text)


def key_text(key: Row) -> str:
    """``tenant:id`` for a row key, ``{}`` for a truncate."""
    return f"{key['tenant']}:{key['id']}" if key else TRUNCATE_KEY


def audit_changes(dsn: str) -> dict[tuple[str, str], list[Change]]:
    """The audit table's changes by (table, key), in the order they were made."""
    found: dict[tuple[str, str], list[Change]] = defaultdict(list)
    with psycopg.connect(dsn) as conn, conn.cursor(name="audit") as cursor:
        cursor.itersize = 20_000
        cursor.execute("SELECT txid, tbl, op, key, row FROM chaos_audit ORDER BY id")
        for txid, table, op, key, row in cursor:
            found[table, key_text(key or {})].append(Change(txid & 0xFFFFFFFF, op, row))
    return found


def log_changes(event_log: Log, topic_prefix: str, findings: Findings,
                replayed: dict[str, dict[str, Row]] | None = None,
                ) -> dict[tuple[str, str], list[Change]]:
    """The log's changes by (table, key), in log order; checks positions per partition.
    ``replayed`` gets each table as the log tells it (see ``replay``)."""
    found: dict[tuple[str, str], list[Change]] = defaultdict(list)
    topics = set(event_log.admin().topics())
    for table in TABLES:
        topic = f"{topic_prefix}.public.{table}"
        messages = list(event_log.read_to_end(topic)) if topic in topics else []
        _read_topic(messages, topic, table, found, findings)
        if replayed is not None:
            replayed[table] = replay(messages)
    return found


def _read_topic(messages: list[Message], topic: str, table: str,
                found: dict[tuple[str, str], list[Change]], findings: Findings) -> None:
    messages.sort(key=lambda m: (m.partition, m.offset))
    last: dict[int, tuple[int, int]] = {}
    for message in messages:
        event = orjson.loads(message.value)
        source = event["source"]
        position = (parse_lsn(source["commit_lsn"]), int(source["seq"]))
        previous = last.get(message.partition)
        if previous is not None and position <= previous:
            findings.misordered += 1
            findings.note(f"log {topic}[{message.partition}]@{message.offset}: position "
                          f"{position} not after {previous}")
        last[message.partition] = position
        if event["op"] == "r":  # a snapshot read: checked by the replay, not a change
            continue
        image = _digested(event["after"]) if event["after"] is not None else None
        found[table, key_text(event["key"])].append(
            Change(int(source["txid"]), event["op"], image, tuple(event.get("unchanged") or ())))


def replay(messages: list[Message]) -> dict[str, Row]:
    """The table as the log tells it: every event applied in position order (a TOASTed
    column PostgreSQL did not resend keeps its previous value)."""
    rows: dict[str, Row] = {}
    for message in sorted(messages, key=lambda m: m.position):
        event = orjson.loads(message.value)
        key = key_text(event["key"])
        if event["op"] == "t":
            rows.clear()
        elif event["op"] == "d":
            rows.pop(key, None)
        else:
            image = _digested(event["after"])
            previous = rows.get(key, {})
            for column in event.get("unchanged") or ():
                if column in previous:
                    image[column] = previous[column]
            rows[key] = image
    return rows


def _digested(row: Row) -> Row:
    if row.get("body") is not None:
        return {**row, "body": body_digest(row["body"])}
    return row


def compare_log(audit: dict[tuple[str, str], list[Change]],
                logged: dict[tuple[str, str], list[Change]], findings: Findings) -> None:
    """Count lost, duplicated, misordered and wrong-image changes (see the module doc)."""
    for where in sorted(set(audit) | set(logged)):
        want, got = audit.get(where, []), logged.get(where, [])
        findings.committed += len(want)
        findings.logged += len(got)
        want_ids = Counter((c.txid, c.op) for c in want)
        got_ids = Counter((c.txid, c.op) for c in got)
        lost, extra = want_ids - got_ids, got_ids - want_ids
        if lost or extra:
            findings.lost += sum(lost.values())
            findings.duplicated += sum(extra.values())
            findings.note(f"log {where}: lost {dict(lost)}, duplicated {dict(extra)}")
            continue
        if [(c.txid, c.op) for c in want] != [(c.txid, c.op) for c in got]:
            findings.misordered += 1
            findings.note(f"log {where}: out of commit order")
            continue
        for committed, change in zip(want, got, strict=True):
            if not _same_image(committed, change):
                findings.wrong_images += 1
                findings.note(f"log {where} txid {change.txid}: image {change.image} "
                              f"instead of {committed.image}")


def _same_image(committed: Change, logged: Change) -> bool:
    if committed.image is None or logged.image is None:
        return committed.image is None and logged.image is None
    expected = {c: v for c, v in committed.image.items() if c not in logged.unchanged}
    return expected == logged.image


def compare_rows(what: str, want: dict[str, Row], got: dict[str, Row],
                 findings: Findings) -> None:
    """Count rows of ``got`` (the log's replay) missing, extra or different from ``want``."""
    missing = set(want) - set(got)
    extra = set(got) - set(want)
    changed = [k for k in set(want) & set(got) if want[k] != got[k]]
    findings.log_rows_diverged += len(missing) + len(extra) + len(changed)
    for kind, keys in (("missing", missing), ("extra", extra), ("different", changed)):
        if keys:
            sample = sorted(keys)[:3]
            detail = [(k, want.get(k), got.get(k)) for k in sample] if kind == "different" \
                else sample
            findings.note(f"{what}: {len(keys)} rows {kind}: {detail}")


Reconcile = Callable[..., Summary]


def reconcile_sinks(config: PipelineConfig, findings: Findings,
                    reconcile: Reconcile = reconcile_pipeline) -> None:
    """``cdc reconcile`` of every sink: each difference it reports diverged (and noted);
    a check that could not finish counts as one divergence."""
    lines: list[str] = []
    try:
        summary = reconcile(config, report=lines.append)
    except Exception as exc:
        reason = describe_failure(exc)
        findings.sink_rows_diverged += 1
        findings.reconcile_summary = f"reconcile: could not finish: {reason}"
        findings.note(findings.reconcile_summary)
        return
    findings.sink_rows_diverged += summary.differences
    findings.reconcile_summary = summary.line()
    for line in lines:
        findings.note(f"reconcile: {line}")


def _dead_letters(event_log: Log, topic_prefix: str, findings: Findings) -> int:
    """Events the connectors dead-lettered (none are expected: every change is valid)."""
    count = 0
    for topic in event_log.admin().topics():
        if topic.startswith(f"{topic_prefix}.dlq."):
            for message in event_log.read_to_end(topic):
                count += 1
                findings.note(f"dead letter in {topic}: "
                              f"{orjson.loads(message.value).get('error')}")
    return count


def check_all(dsn: str, event_log: Log, config: PipelineConfig,
              reconcile: Reconcile = reconcile_pipeline) -> Findings:
    """Every check of the module docstring (the pipeline still running)."""
    findings = Findings()
    reconcile_sinks(config, findings, reconcile)
    replayed: dict[str, dict[str, Row]] = {}
    topic_prefix = config.topic_prefix
    compare_log(audit_changes(dsn), log_changes(event_log, topic_prefix, findings, replayed),
                findings)
    findings.dead_letters = _dead_letters(event_log, topic_prefix, findings)
    for table in TABLES:
        compare_rows(f"log replay {table}", table_rows(dsn, table), replayed.get(table, {}),
                     findings)
    return findings
