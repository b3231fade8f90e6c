"""Schema changes that change the values of rows nobody wrote since.

Logical decoding sends row events only for rows a statement writes. Some DDL changes
every existing row without writing it: ``ADD COLUMN … DEFAULT`` (a fast default, or a
volatile one that rewrites the table), ``ALTER COLUMN … TYPE`` (with or without
``USING``), ``DROP COLUMN``, an added stored generated column. After them a log of row
events alone no longer folds to the table. The next Relation message of the table shows
the new columns; comparing them with the schema version the log recorded tells whether
the old rows changed (``SchemaRewrite``), and the capture then reads the table again
(``source.schema_changes``).

A column added without a default holds NULL in every existing row, which is what a
reader of an event without that field assumes: no re-read. ``SET DEFAULT`` alone changes
no row, and the Relation does not change either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from ..pgoutput import Relation
from ..source.ddl_race import outlast_ddl

# (name, type oid, type modifier, key flag) per column, as ``ShapeRegistry`` records them
Signature = tuple[tuple[str, int, int, bool], ...]

_VALUED_SQL = (
    "SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = %s"
    " AND attname = ANY(%s) AND NOT attisdropped"
    " AND (atthasmissing OR atthasdef OR attgenerated <> '')")


def signature_of(relation: Relation) -> Signature:
    """The columns of ``relation`` as a schema version records them."""
    return tuple((c.name, c.type_oid, c.type_modifier, c.key) for c in relation.columns)


@dataclass(frozen=True, slots=True)
class SchemaRewrite:
    """How a table's columns changed between two schema versions."""

    dropped: tuple[str, ...]  # gone (or renamed away)
    retyped: tuple[str, ...]  # same name, another type or type modifier
    added: tuple[str, ...]  # new (or renamed to), whatever their values

    @classmethod
    def between(cls, before: Signature, after: Signature) -> SchemaRewrite:
        """The columns dropped, retyped and added from ``before`` to ``after``."""
        old = {name: (type_oid, modifier) for name, type_oid, modifier, _ in before}
        new = {name: (type_oid, modifier) for name, type_oid, modifier, _ in after}
        return cls(tuple(name for name in old if name not in new),
                   tuple(name for name in new if name in old and old[name] != new[name]),
                   tuple(name for name in new if name not in old))

    def reason(self, valued: Sequence[str]) -> str | None:
        """Why existing rows changed (``valued``: the added columns that hold a value in
        rows written before), or None when none did."""
        parts = []
        if self.dropped:
            parts.append(f"dropped {', '.join(self.dropped)}")
        if self.retyped:
            parts.append(f"changed the type of {', '.join(self.retyped)}")
        if valued:
            parts.append(f"added {', '.join(valued)} with a value in existing rows")
        return "; ".join(parts) or None


def valued_columns(conn: psycopg.Connection[Any], relation_oid: int,
                   names: Sequence[str]) -> list[str]:
    """Which of ``names`` (columns of the relation) hold a value in rows that existed
    before they were added: a default (fast or volatile) or a generated expression."""
    if not names:
        return []
    rows = outlast_ddl(lambda: conn.execute(_VALUED_SQL, (relation_oid, list(names)))
                       .fetchall(), what=f"reading the defaults of relation {relation_oid}")
    found = {str(row[0]) for row in rows}
    return [name for name in names if name in found]
