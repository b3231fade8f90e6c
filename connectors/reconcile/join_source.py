"""A joined view's records as PostgreSQL makes them, over one consistent snapshot.

``JoinedSource.read`` runs ``join_query.joined_query`` in a ``REPEATABLE READ`` read-only
transaction (one snapshot for every table of the view) on a connection with the
capture's pinned session settings, and turns each root row's node into the record the
sinks should hold: every row's column texts decoded by the capture's own codecs (the
table's ``TableShape``, as ``source.TableSource`` decodes rows; a value a codec leaves
to the capture's per-column path goes through ``read_event``), then JSON-encoded as the
events are (NaN → null…), then shaped level by level (``shape_record``) as
``derived.build_record`` shapes it: the level's view (fields, rename, computed, filter),
a lookup that finds nothing or that its filter rejects is ``null`` (a required one: no
record), a nested row its filter rejects is left out. Which rows join, and in which
order, comes from SQL only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg

from cdc.capture.events import TableShape, read_event
from cdc.capture.schema.shapes import ShapeRegistry
from cdc.capture.snapshot.catalog import catalog_tables
from cdc.capture.source import session
from cdc.config.topic_names import TopicNamer
from derived import JoinedView, JoinLevel, apply_view
from derived.apply import Record

from .join_query import TableColumns, joined_query
from .source import current_lsn

FETCH = 2000  # root rows per fetch of the server-side cursor


@dataclass(frozen=True, slots=True)
class JoinedRow:
    """One root row: its event key, its key columns' output texts (to read it again), and
    the record the view makes of it (``None``: none, so the sink must hold nothing)."""

    key: dict[str, Any]
    key_text: tuple[str, ...]
    record: Record | None


@dataclass(frozen=True, slots=True)
class JoinedRead:
    """The root rows one snapshot read, and the WAL positions just before and after it."""

    rows: list[JoinedRow]
    before_lsn: int
    after_lsn: int


class JoinedSource:
    """The tables of one joined view: their shapes, and their records read in SQL."""

    def __init__(self, dsn: str, view: JoinedView, topics: TopicNamer,
                 publication: str | None = None, fetch: int = FETCH) -> None:
        """``fetch``: root rows per batch (one fetch of the server-side cursor)."""
        self.view = view
        self.fetch = fetch
        self.name = view.source
        self.conn = session.connect(dsn)
        try:
            wanted = sorted(view.tables())
            found = catalog_tables(self.conn, wanted, publication)
            missing = [f"{s}.{t}" for s, t in wanted if (s, t) not in found]
            if missing:
                raise psycopg.errors.UndefinedTable(
                    f"joined view {view.target}: table {', '.join(missing)} does not exist")
            shapes = ShapeRegistry(self.conn, topics)
            self.shapes: dict[tuple[str, str], TableShape] = {}
            self.tables: dict[tuple[str, str], TableColumns] = {}
            for table, catalog in found.items():
                shapes.learn(catalog.relation)
                shape = shapes.get(catalog.relation.oid)
                self.shapes[table] = shape
                self.tables[table] = TableColumns(
                    shape.columns, tuple(c.type_oid for c in catalog.relation.columns),
                    tuple(shape.columns[i] for i in shape.key_indexes), catalog.row_filter)
        except BaseException:
            self.conn.close()
            raise

    def read(self, keys: Sequence[Sequence[str]] | None = None,
             on_snapshot: Callable[[int], None] | None = None) -> Iterator[JoinedRead]:
        """The view's root rows (``keys``: only these, by key text) in batches, all from
        one snapshot; each batch carries the snapshot's WAL positions (before: taken
        just before the snapshot, after: once it is taken). ``on_snapshot`` is called
        with the after position once the snapshot is taken, before any row is read (a
        catch-up: the sinks then hold at least what the snapshot sees)."""
        query = joined_query(self.view, self.tables, keys)
        before = current_lsn(self.conn)
        root = self.shapes[self.view.table]
        key_names = [root.columns[i] for i in root.key_indexes]
        with self.conn.transaction(), self.conn.cursor(name="reconcile_join") as cursor:
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            row = self.conn.execute(b"SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"
                                    ).fetchone()  # takes the snapshot
            assert row is not None
            after = int(row[0])
            if on_snapshot is not None:
                on_snapshot(after)
            cursor.execute(query)
            while batch := cursor.fetchmany(self.fetch):
                rows: list[JoinedRow] = []
                for *key_text, node_text in batch:
                    node = orjson.loads(node_text)
                    own = self.row_of(self.view, node)
                    key = {name: own.get(name) for name in key_names}
                    rows.append(JoinedRow(key, tuple(key_text),
                                          self.shape_record(self.view, node, own)))
                yield JoinedRead(rows, before, after)

    def row_of(self, level: JoinLevel, node: list[Any]) -> dict[str, Any]:
        """The event row (``after``) of a node's column texts."""
        shape = self.shapes[level.table]
        texts: list[str | None] = node[0]
        try:  # read_event's fast path ...
            row = {name: None if value is None else codec(value)
                   for name, codec, value in zip(shape.columns, shape.codecs, texts,
                                                 strict=True)}
        except Exception:  # a value kept as text: the capture's per-column path
            after: dict[str, Any] = orjson.loads(read_event(shape, tuple(texts), 0).body
                                                 )["after"]
            return after
        decoded: dict[str, Any] = orjson.loads(orjson.dumps(row))  # ... and its JSON
        return decoded

    def shape_record(self, level: JoinLevel, node: list[Any],
                     row: dict[str, Any] | None = None) -> Record | None:
        """The record of one node (``build_record``'s shaping over SQL's joins)."""
        if row is None:
            row = self.row_of(level, node)
        record = apply_view(level.view, row)
        if record is None:
            return None
        at = 1
        for lookup in level.lookups:
            found_node = node[at]
            at += 1
            found = None if found_node is None else self.shape_record(lookup, found_node)
            if found is None and lookup.required:
                return None
            record[lookup.name] = found
        for nested in level.nested:
            children: list[Any] = node[at] or []
            at += 1
            built = (self.shape_record(nested, child) for child in children)
            record[nested.name] = [child for child in built if child is not None]
        return record

    def current_lsn(self) -> int:
        """``pg_current_wal_lsn()`` now."""
        return current_lsn(self.conn)

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


__all__ = ["JoinedRead", "JoinedRow", "JoinedSource"]
