"""Column types from the capture's schema topic ``<prefix>._schemas``, for exact mappings.

The capture records each table's columns (name, PostgreSQL type) as a new schema version
whenever they change, in the same append as (and before) the first event of that version.
So the sink reads the topic again at once when it meets a schema version newer than it
knows (a column was just added: its mapping must come from its type, not from a guess at
its first value); a version it still cannot find is looked for again at most once per
``reread_interval`` seconds. Asked for the version ``NEWEST``, it reads the topic again
unless it did in the last second.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Protocol

import orjson

from cdc.log import Log, StartAt

from .mapping import ColumnType

log = logging.getLogger(__name__)

# asked for as a table's version: the schema topic's newest record of it (read again
# unless read in the last ``NEWEST_REREAD_S``: a joined record's rows carry no version)
NEWEST = 1 << 62
NEWEST_REREAD_S = 1.0


class ColumnTypes(Protocol):
    """Column name → type of a table, or ``None`` if unknown: the type's name
    (``pg_catalog.int4``), or its structure where the schema record gives one
    (``type_detail``, see ``cdc.capture.schema.type_details``)."""

    def __call__(self, schema: str, table: str,
                 version: int) -> Mapping[str, ColumnType] | None: ...


class SchemaTopicColumns:
    """``ColumnTypes`` read from a log's schema topic."""

    def __init__(self, event_log: Log, topic: str, group: str,
                 reread_interval: float = 5.0, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._log = event_log
        self._topic = topic
        self._group = group
        self._reread_interval = reread_interval
        self._tables: dict[str, tuple[int, dict[str, ColumnType]]] = {}
        self._read_at = float("-inf")
        self._looked_for: dict[str, int] = {}  # table → the newest version read for

    def __call__(self, schema: str, table: str,
                 version: int) -> Mapping[str, ColumnType] | None:
        name = f"{schema}.{table}"
        if version >= NEWEST:
            if self._clock() - self._read_at >= NEWEST_REREAD_S:
                self._read()
            newest = self._tables.get(name)
            return newest[1] if newest is not None else None
        known = self._tables.get(name)
        if (known is None or known[0] < version) and (
                version > self._looked_for.get(name, -1)
                or self._clock() - self._read_at >= self._reread_interval):
            self._looked_for[name] = max(version, self._looked_for.get(name, -1))
            self._read()
            known = self._tables.get(name)
        return known[1] if known is not None else None

    def _read(self) -> None:
        self._read_at = self._clock()
        if self._topic not in self._log.admin().topics():
            return
        consumer = self._log.consumer(self._group, topics=[self._topic],
                                      start=StartAt.earliest())
        try:
            while batch := consumer.poll(1000, timeout=0.2):
                for message in batch:
                    self._learn(message.value)
        finally:
            consumer.close()

    def _learn(self, value: bytes) -> None:
        try:
            record = orjson.loads(value)
            name = f"{record['schema']}.{record['table']}"
            version = int(record["schema_version"])
            types: dict[str, ColumnType] = {
                str(c["name"]): c["type_detail"] if isinstance(c.get("type_detail"), dict)
                else str(c["type"]) for c in record["columns"]}
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            log.warning("skipping a malformed record of %s", self._topic,
                        extra={"topic": self._topic})
            return
        if version >= self._tables.get(name, (0, {}))[0]:
            self._tables[name] = (version, types)
