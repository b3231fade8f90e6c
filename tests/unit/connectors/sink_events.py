"""Change events as sinks receive them, for the sink tests (unit and integration)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from cdc.log import Message, Position
from connectors.contract import SinkEvent, version_of


@dataclass
class TableEvents:
    """Builds the events of one table, as the capture writes them (``source`` included)."""

    schema: str = "public"
    table: str = "orders"
    prefix: str = "app"
    _offsets: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def topic(self) -> str:
        return f"{self.prefix}.{self.schema}.{self.table}"

    def event(self, op: str, key: dict[str, Any], lsn: int, seq: int = 0, *,
              after: dict[str, Any] | None = None, before: dict[str, Any] | None = None,
              unchanged: Iterable[str] = ()) -> SinkEvent:
        """Any event; ``lsn`` and ``seq`` make its source position and version."""
        body = {"op": op, "key": key, "before": before, "after": after,
                "unchanged": list(unchanged), "schema_version": 1,
                "source": {"db": "app", "schema": self.schema, "table": self.table,
                           "lsn": f"0/{lsn:X}", "commit_lsn": f"0/{lsn:X}", "seq": seq,
                           "txid": 1, "commit_ts": "2026-01-01T00:00:00Z", "snapshot": False}}
        value = orjson.dumps(body)
        message = Message(self.topic, 0, next(self._offsets), 0, orjson.dumps(key), value,
                          Position(lsn, seq), op == "d")
        return SinkEvent(message, orjson.loads(value), version_of(lsn, seq))

    def upsert(self, row: dict[str, Any], lsn: int, seq: int = 0, *, key: str | tuple[str, ...]
               = "id", op: str = "u", unchanged: Iterable[str] = (),
               before: dict[str, Any] | None = None) -> SinkEvent:
        """An insert/update of ``row``; its key is the ``key`` column(s) of the row."""
        columns = (key,) if isinstance(key, str) else key
        return self.event(op, {c: row[c] for c in columns}, lsn, seq, after=row,
                          before=before, unchanged=unchanged)

    def delete(self, key: dict[str, Any], lsn: int, seq: int = 0) -> SinkEvent:
        """A delete of the row with ``key``."""
        return self.event("d", key, lsn, seq)

    def truncate(self, lsn: int, seq: int = 0) -> SinkEvent:
        """A truncate of the table."""
        return self.event("t", {}, lsn, seq)


def compact(body: Any) -> bytes | str:
    """orjson's JSON, or the json module's for integers past 64 bits (orjson refuses)."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body, separators=(",", ":"))


def sink_event(names: tuple[str, str], op: str, key: dict[str, Any], after: Any,
               number: int, dumps: Any = compact, unchanged: Any = (),
               prefix: str = "app") -> SinkEvent:
    """One event of table ``names`` (schema, table) whose raw value is ``dumps`` of it
    (the native renderers' differential tests vary the JSON's spelling that way)."""
    schema, table = names
    body = {"op": op, "key": key, "before": None, "after": after,
            "unchanged": list(unchanged) if isinstance(unchanged, tuple) else unchanged,
            "source": {"db": "app", "schema": schema, "table": table, "seq": number},
            "schema_version": 1}
    raw = dumps(body)
    raw = raw if isinstance(raw, bytes) else raw.encode()
    lsn = 0x1000 + number * 64
    key_bytes = compact(key)
    key_bytes = key_bytes if isinstance(key_bytes, bytes) else key_bytes.encode()
    message = Message(f"{prefix}.{schema}.{table}", 0, number, 0, key_bytes, raw,
                      Position(lsn, number), op == "d")
    return SinkEvent(message, orjson.loads(raw), version_of(lsn, number))
