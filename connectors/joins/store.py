"""``JoinStore``: the rows a connector's joined views need, in an on-disk SQLite database.

SQLite (the standard library's ``sqlite3``) holds, in one file per connector:

- ``rows``: the current row of every key of every joined table (JSON, as the events
  carry it) and the source position it is from, so a change to one row can be joined
  with the others;
- ``truncated``: the position of each table's last truncate: it removes the rows from
  before it, and events from before it that are read later (from other partitions)
  are ignored;
- ``links``: for each join column set, which keys hold which values (the indexes that
  find an order's items, a customer's orders);
- ``offsets``: the next log offset to apply per topic partition, written in the same
  transaction as the rows, so the store is always the state after exactly those events;
- ``pending``: root keys whose records must be written again, cleared once the sink has
  flushed them (a crash in between writes them again at start-up);
- ``meta``: the last write version handed out (versions only grow, across restarts);
- ``deleted`` and ``incomplete``: the two halves of key changes. PostgreSQL sends a
  key-changing update as a delete of the old key then an insert of the new one (the
  next position), and the insert leaves out unchanged TOAST columns: the deleted row
  (the last ``KEPT_DELETES``) completes an insert read after it, an insert read first
  waits there for its delete.

The database is written with ``synchronous=FULL`` in WAL mode: a transaction is on disk
before any record computed from it is sent. Memory stays bounded by SQLite's page cache
(``cache_size``), whatever the tables' sizes.
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from cdc.log import NO_POSITION, Position, TopicPartition
from derived.join_build import Keyed

Table = tuple[str, str]

CACHE_KIB = 64 * 1024
CACHED = 50_000  # rows, and key lists of join values, kept decoded in memory
KEPT_DELETES = 100_000  # deleted rows kept for the insert of a key change read after them

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS rows (tbl TEXT NOT NULL, key BLOB NOT NULL, row BLOB NOT NULL,"
    " lsn INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (tbl, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS truncated (tbl TEXT PRIMARY KEY, lsn INTEGER NOT NULL,"
    " seq INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS links (tbl TEXT NOT NULL, cols TEXT NOT NULL, val BLOB NOT NULL,"
    " key BLOB NOT NULL, PRIMARY KEY (tbl, cols, val, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS offsets (topic TEXT NOT NULL, part INTEGER NOT NULL,"
    " next INTEGER NOT NULL, PRIMARY KEY (topic, part)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS pending (target TEXT NOT NULL, key BLOB NOT NULL,"
    " PRIMARY KEY (target, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS deleted (tbl TEXT NOT NULL, lsn INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, row BLOB NOT NULL, PRIMARY KEY (tbl, lsn, seq)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS incomplete (tbl TEXT NOT NULL, lsn INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, key BLOB NOT NULL, missing BLOB NOT NULL,"
    " PRIMARY KEY (tbl, lsn, seq)) WITHOUT ROWID",
)


def table_id(table: Table) -> str:
    """How a table is named in the store."""
    return f"{table[0]}.{table[1]}"


def key_bytes(key: dict[str, Any]) -> bytes:
    """The stored form of a row's key (its JSON, columns in the event's order)."""
    return _compact(orjson.dumps(key))


def _compact(made: bytes) -> bytes:
    """``made`` (from orjson, whose bytes keep a buffer of about 1 KiB however short the
    JSON) copied to a bytes object of its own length, to be kept in a cache."""
    return made.decode().encode()


class JoinStore:
    """The state of one connector's joined views (see the module docstring)."""

    def __init__(self, path: Path, indexes: Iterable[tuple[Table, tuple[str, ...]]]) -> None:
        """Open (or create) the store at ``path``; ``indexes``: the ``(table, columns)``
        whose values the joins look rows up by."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        for statement in _SCHEMA:
            self._db.execute(statement)
        self._rows: OrderedDict[tuple[str, bytes], dict[str, Any] | None] = OrderedDict()
        self._keys: OrderedDict[tuple[str, str, bytes], list[bytes]] = OrderedDict()
        self._truncated: dict[str, Position] = {}
        self._indexes: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        for table, columns in sorted(set(indexes)):
            self._indexes.setdefault(table_id(table), []).append((",".join(columns), columns))

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic, durable change of the store."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            self._rows.clear()
            self._keys.clear()
            self._truncated.clear()
            raise
        self._db.execute("COMMIT")

    def next_offsets(self) -> dict[TopicPartition, int]:
        """The next offset to apply per partition (what the store holds is everything
        before)."""
        return {TopicPartition(topic, part): next_offset for topic, part, next_offset
                in self._db.execute("SELECT topic, part, next FROM offsets")}

    def set_offsets(self, offsets: dict[TopicPartition, int]) -> None:
        """Record that everything before ``offsets`` is applied."""
        self._db.executemany(
            "INSERT INTO offsets (topic, part, next) VALUES (?, ?, ?) ON CONFLICT (topic, part)"
            " DO UPDATE SET next = max(next, excluded.next)",
            [(tp.topic, tp.partition, offset) for tp, offset in offsets.items()])

    def row(self, table: Table, key: bytes) -> dict[str, Any] | None:
        """The stored row of ``key``, or ``None``."""
        tbl = table_id(table)
        try:
            return self._rows[tbl, key]
        except KeyError:
            pass
        found = self._db.execute("SELECT row FROM rows WHERE tbl = ? AND key = ?",
                                 (tbl, key)).fetchone()
        row = None if found is None else orjson.loads(found[0])
        _remember(self._rows, (tbl, key), row)
        return row

    def put(self, table: Table, key: bytes, row: dict[str, Any] | None,
            old: dict[str, Any] | None, position: Position) -> None:
        """Store ``row`` as the row of ``key`` at ``position`` (``None``: delete it);
        ``old`` is what the store held (its links are replaced)."""
        tbl = table_id(table)
        for cols, columns in self._indexes.get(tbl, ()):
            was = _link_value(old, columns)
            now = _link_value(row, columns)
            if was == now:
                continue
            self._keys.pop((tbl, cols, was or b""), None)
            self._keys.pop((tbl, cols, now or b""), None)
            if was is not None:
                self._db.execute("DELETE FROM links WHERE tbl = ? AND cols = ? AND val = ? AND "
                                 "key = ?", (tbl, cols, was, key))
            if now is not None:
                self._db.execute("INSERT OR IGNORE INTO links (tbl, cols, val, key) VALUES "
                                 "(?, ?, ?, ?)", (tbl, cols, now, key))
        _remember(self._rows, (tbl, key), row)
        if row is None:
            self._db.execute("DELETE FROM rows WHERE tbl = ? AND key = ?", (tbl, key))
        else:
            self._db.execute("INSERT OR REPLACE INTO rows (tbl, key, row, lsn, seq) VALUES "
                             "(?, ?, ?, ?, ?)", (tbl, key, orjson.dumps(row), *position))

    def position(self, table: Table, key: bytes) -> Position:
        """The source position of the stored row of ``key`` (0/0: none)."""
        found = self._db.execute("SELECT lsn, seq FROM rows WHERE tbl = ? AND key = ?",
                                 (table_id(table), key)).fetchone()
        return NO_POSITION if found is None else Position(*found)

    def truncated(self, table: Table) -> Position:
        """The position of the last truncate of ``table`` applied (0/0: none)."""
        tbl = table_id(table)
        known = self._truncated.get(tbl)
        if known is None:
            found = self._db.execute("SELECT lsn, seq FROM truncated WHERE tbl = ?",
                                     (tbl,)).fetchone()
            known = self._truncated[tbl] = NO_POSITION if found is None else Position(*found)
        return known

    def rows_before(self, table: Table, position: Position
                    ) -> list[tuple[bytes, dict[str, Any]]]:
        """Every stored ``(key, row)`` of ``table`` from before ``position``."""
        return [(key, orjson.loads(row)) for key, row in self._db.execute(
            "SELECT key, row FROM rows WHERE tbl = ? AND (lsn, seq) < (?, ?)",
            (table_id(table), *position)).fetchall()]

    def truncate(self, table: Table, position: Position) -> None:
        """Remove the rows of ``table`` from before ``position`` (a truncate there)."""
        for key, row in self.rows_before(table, position):
            self.put(table, key, None, row, position)
        self._db.execute("INSERT INTO truncated (tbl, lsn, seq) VALUES (?, ?, ?) ON CONFLICT "
                         "(tbl) DO UPDATE SET lsn = excluded.lsn, seq = excluded.seq",
                         (table_id(table), *position))
        self._truncated[table_id(table)] = position

    def matching(self, table: Table, columns: tuple[str, ...],
                 values: tuple[Any, ...]) -> Sequence[Keyed]:
        """``(key, row)`` of every row of ``table`` whose ``columns`` equal ``values``."""
        found = []
        for key in self.matching_keys(table, columns, values):
            row = self.row(table, key)
            if row is not None:
                found.append((orjson.loads(key), row))
        return found

    def matching_keys(self, table: Table, columns: tuple[str, ...],
                      values: tuple[Any, ...]) -> list[bytes]:
        """The keys of the rows ``matching`` would return."""
        where = (table_id(table), ",".join(columns), _compact(orjson.dumps(list(values))))
        keys = self._keys.get(where)
        if keys is None:
            keys = [key for (key,) in self._db.execute(
                "SELECT key FROM links WHERE tbl = ? AND cols = ? AND val = ?", where)]
            _remember(self._keys, where, keys)
        return keys

    def add_pending(self, target: str, keys: Iterable[bytes]) -> None:
        """Mark the records of ``keys`` in ``target`` to be written."""
        self._db.executemany("INSERT OR IGNORE INTO pending (target, key) VALUES (?, ?)",
                             [(target, key) for key in keys])

    def pending(self) -> dict[str, list[bytes]]:
        """The keys to write, per target, in key order."""
        found: dict[str, list[bytes]] = {}
        for target, key in self._db.execute("SELECT target, key FROM pending"):
            found.setdefault(target, []).append(key)
        return found

    def has_pending(self) -> bool:
        """True when some record is waiting to be written."""
        return self._db.execute("SELECT 1 FROM pending LIMIT 1").fetchone() is not None

    def pending_pages(self, size: int) -> Iterator[list[tuple[str, bytes]]]:
        """The ``(target, key)`` to write, ``size`` at a time, in order."""
        after: tuple[str, bytes] = ("", b"")
        while True:
            page = self._db.execute("SELECT target, key FROM pending WHERE (target, key) > "
                                    "(?, ?) ORDER BY target, key LIMIT ?",
                                    (*after, size)).fetchall()
            if not page:
                return
            yield page
            after = page[-1]

    def clear_pending(self) -> None:
        """Everything pending was written and flushed."""
        self._db.execute("DELETE FROM pending")

    def keep_deleted(self, table: Table, position: Position, row: dict[str, Any]) -> None:
        """Keep the row a delete at ``position`` removed (the first half of a key change?)."""
        self._db.execute("INSERT OR REPLACE INTO deleted (tbl, lsn, seq, row) VALUES "
                         "(?, ?, ?, ?)", (table_id(table), *position, orjson.dumps(row)))

    def deleted(self, table: Table, position: Position) -> dict[str, Any] | None:
        """The row the delete at ``position`` removed, if it is kept."""
        found = self._db.execute("SELECT row FROM deleted WHERE tbl = ? AND lsn = ? AND "
                                 "seq = ?", (table_id(table), *position)).fetchone()
        return None if found is None else orjson.loads(found[0])

    def forget_old_deletes(self) -> None:
        """Keep only the last ``KEPT_DELETES`` deleted rows."""
        self._db.execute(
            "DELETE FROM deleted WHERE (lsn, seq) < (SELECT lsn, seq FROM deleted "
            "ORDER BY lsn DESC, seq DESC LIMIT 1 OFFSET ?)", (KEPT_DELETES,))

    def wait_for_delete(self, table: Table, position: Position, key: bytes,
                        missing: list[str]) -> None:
        """An insert at ``position`` lacks ``missing`` until the delete before it comes."""
        self._db.execute("INSERT OR REPLACE INTO incomplete (tbl, lsn, seq, key, missing) "
                         "VALUES (?, ?, ?, ?, ?)",
                         (table_id(table), *position, key, orjson.dumps(missing)))

    def waiting_insert(self, table: Table, position: Position) -> tuple[bytes, list[str]] | None:
        """The key and missing columns of an insert at ``position`` waiting for its delete
        (forgotten once returned)."""
        where = (table_id(table), *position)
        found = self._db.execute("SELECT key, missing FROM incomplete WHERE tbl = ? AND "
                                 "lsn = ? AND seq = ?", where).fetchone()
        if found is None:
            return None
        self._db.execute("DELETE FROM incomplete WHERE tbl = ? AND lsn = ? AND seq = ?", where)
        return found[0], orjson.loads(found[1])

    def versions(self, count: int, at_least: int) -> int:
        """Hand out ``count`` versions, each above every one handed out before and the
        first at least ``at_least``; returns the first."""
        found = self._db.execute("SELECT value FROM meta WHERE name = 'version'").fetchone()
        first = max((found[0] if found else 0) + 1, at_least)
        self._db.execute("INSERT INTO meta (name, value) VALUES ('version', ?) ON CONFLICT "
                         "(name) DO UPDATE SET value = excluded.value", (first + count - 1,))
        return first

    def size_bytes(self) -> int:
        """The database file's size (without its write-ahead log)."""
        return self.path.stat().st_size if self.path.exists() else 0


def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """Keep ``value`` in ``cache``, forgetting the oldest entry past ``CACHED``."""
    cache[key] = value
    if len(cache) > CACHED:
        cache.popitem(last=False)


def _link_value(row: dict[str, Any] | None, columns: tuple[str, ...]) -> bytes | None:
    if row is None:
        return None
    values = [row.get(column) for column in columns]
    return None if any(value is None for value in values) else orjson.dumps(values)
