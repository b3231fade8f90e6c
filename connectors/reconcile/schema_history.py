"""Why a record differs: was its row written under an older shape of the table?

The capture records each new shape of a table as a schema version on
``<prefix>._schemas``, with ``since_lsn``: the commit LSN from which the table's events
carry it. A sink record whose version (commit LSN, seq) is older than the last change of
the table's columns was written before that change — an added column with a value, a
retyped or a dropped one: the migration changed the row without writing it, and the
capture's re-read has not reached it (or ``schema_changes`` says ``ignore``).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from cdc.log import Log

from .compare import Difference, Kind


@dataclass(frozen=True, slots=True)
class ColumnChange:
    """The table's last schema version whose columns differ from the one before."""

    version: int
    since_lsn: int

    @property
    def sink_version(self) -> int:
        """The first sink version written under the new shape (see ``describe_version``)."""
        return self.since_lsn << 10

    def cause(self) -> str:
        """The cause, as a report line names it."""
        lsn = f"{self.since_lsn >> 32:X}/{self.since_lsn & 0xFFFFFFFF:X}"
        return (f"schema changed since the row was written (schema version {self.version} "
                f"from {lsn})")


def last_column_change(event_log: Log, prefix: str, table: str) -> ColumnChange | None:
    """``table``'s last column change recorded on the log, or None (none, or recorded by a
    capture that did not note ``since_lsn``)."""
    key = orjson.dumps(table)
    return column_change(orjson.loads(message.value)
                         for message in event_log.read_to_end(f"{prefix}._schemas")
                         if message.key == key and message.value)


def column_change(records: Iterable[Mapping[str, Any]]) -> ColumnChange | None:
    """The last version among one table's schema ``records`` whose columns (names, types,
    type modifiers, the structure of composite types) differ from the version before it."""
    ordered = sorted(records, key=lambda record: int(record["schema_version"]))
    change: ColumnChange | None = None
    for before, after in itertools.pairwise(ordered):
        if _columns(before) == _columns(after):
            continue
        since = after.get("since_lsn")
        change = ColumnChange(int(after["schema_version"]), since) \
            if isinstance(since, int) else None
    return change


def explain(differences: list[Difference], change: ColumnChange | None) -> list[Difference]:
    """``differences``, each record written before ``change`` with it as its cause."""
    if change is None:
        return differences
    return [dataclasses.replace(d, cause=change.cause())
            if d.kind is Kind.DIFFERENT and d.sink_version is not None
            and d.sink_version < change.sink_version else d
            for d in differences]


def _columns(record: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    # type_detail: a composite type's attributes altered (``ALTER TYPE … ADD ATTRIBUTE``)
    # change its values in every row without a write, as a migration of the table does
    return [(c.get("name"), c.get("type_oid"), c.get("type_modifier"),
             orjson.dumps(c.get("type_detail"), option=orjson.OPT_SORT_KEYS))
            for c in record.get("columns", ())]

