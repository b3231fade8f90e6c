"""What incremental snapshots record on ``<prefix>._snapshots``, and reading it back.

One record per state change of a table's snapshot, keyed by the table (so a table's
records share a partition and stay in order; the last one is its state)::

    {"kind": "incremental", "table": "public.orders", "state": "running",
     "request_lsn": "0/1A2B3C", "chunk_size": 5000, "where": null, "chunks": 12,
     "rows": 60000, "last_key": ["60000"], "requested_at": "…", "updated_at": "…"}

States: ``requested`` → ``running`` (after each chunk, with the last key done) →
``completed``; or ``cancelled`` / ``failed`` (with ``reason``). A ``tables`` record holds
the publication's tables the capture already knows (new ones are snapshotted).

Requests and cancellations reach the capture as logical decoding messages with prefix
``distributary.snapshot`` (``cdc snapshot`` emits them), so they arrive in stream order
and are recorded before the capture acknowledges past them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import orjson

from cdc.log import Log, Record

from .initial import snapshot_topic

MESSAGE_PREFIX = "distributary.snapshot"
ACTIVE_STATES = frozenset({"requested", "running"})
TABLES_KEY = b'"tables"'


def now_iso() -> str:
    """The current time, ISO-8601 UTC."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class TableSnapshot:
    """The state of one table's incremental snapshot."""

    table: str
    state: str
    request_lsn: str = "0/0"
    chunk_size: int = 5000
    where: str | None = None
    chunks: int = 0
    rows: int = 0
    last_key: list[str] | None = None
    reason: str | None = None
    requested_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    def moved(self, **changes: Any) -> TableSnapshot:
        """This state with ``changes`` and a fresh ``updated_at``."""
        return replace(self, updated_at=now_iso(), **changes)

    def record(self, prefix: str) -> Record:
        """The log record of this state."""
        return Record(snapshot_topic(prefix), orjson.dumps(f"incremental:{self.table}"),
                      orjson.dumps({"kind": "incremental", **asdict(self)}))

    @classmethod
    def from_record(cls, value: dict[str, Any]) -> TableSnapshot:
        """The state a record holds (unknown fields ignored: newer writers may add some)."""
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in value.items() if k in names})


def read_records(event_log: Log, prefix: str) -> list[dict[str, Any]]:
    """Every record on the snapshots topic, per partition in order."""
    topic = snapshot_topic(prefix)
    if topic not in event_log.admin().topics():
        return []
    return [orjson.loads(m.value) for m in event_log.read_to_end(topic)]


def table_states(records: list[dict[str, Any]]) -> dict[str, TableSnapshot]:
    """The latest incremental-snapshot state of each table."""
    states: dict[str, TableSnapshot] = {}
    for value in records:
        if value.get("kind") == "incremental":
            state = TableSnapshot.from_record(value)
            states[state.table] = state
    return states


def known_tables(records: list[dict[str, Any]]) -> dict[str, int] | None:
    """The tables (name → relation oid) the capture recorded as known, or None if it
    never did."""
    found: dict[str, int] | None = None
    for value in records:
        if value.get("kind") == "tables":
            found = {str(k): int(v) for k, v in (value.get("tables") or {}).items()}
    return found


def tables_record(prefix: str, tables: dict[str, int]) -> Record:
    """A record of the tables (name → relation oid) the capture knows."""
    return Record(snapshot_topic(prefix), TABLES_KEY,
                  orjson.dumps({"kind": "tables", "tables": dict(sorted(tables.items())),
                                "updated_at": now_iso()}))
