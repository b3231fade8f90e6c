"""``JoinStore``: the rows a connector's joined views need, in an on-disk SQLite database.

SQLite (the standard library's ``sqlite3``) holds, in one file per connector:

- ``rows``: the current row of every key of every joined table (JSON, as the events
  carry it) and the source position it is from, so a change to one row can be joined
  with the others. Keys are stored in the order of their numbers (``key_bytes``), so
  one order's items and one customer's orders sit on neighbouring pages (a store whose
  keys were JSON alone has them stored again once, when it opens);
- ``truncated``: the position of each table's last truncate: it removes the rows from
  before it, and events from before it that are read later (from other partitions)
  are ignored;
- ``link_sets``: the join column sets the store indexes, each with a number (a join's
  ``on`` changed since the store was written: its links are built again from the stored
  rows when it opens, and ``JoinedSink.open`` writes again every record of the views
  reading those tables);
- ``set_links``: for each join column set (by its number), which keys hold which values
  (the indexes that find an order's items, a customer's orders). A value of one integer
  or text column is stored as itself, so the entries of consecutive ids sit side by side
  and a load appends to the index; other values as a JSON array (``link_value``). (A
  store written before these two tables, with ``links`` and ``indexes``, has its links
  built again in this layout when it opens; its records are unchanged by that.)
- ``offsets``: the next log offset to apply per topic partition, written in the same
  transaction as the rows, so the store is always the state after exactly those events;
- ``pending``: root keys whose records must be written again, cleared once the sink has
  flushed them (a crash in between writes them again at start-up);
- ``meta``: the last write version handed out (versions only grow, across restarts),
  and the views whose initial load is under way (``begin_load``: their records are
  marked all at once when it ends, not per event);
- ``deleted`` and ``incomplete``: the two halves of key changes. PostgreSQL sends a
  key-changing update as a delete of the old key then an insert of the new one (the
  next position), and the insert leaves out unchanged TOAST columns: the deleted row
  (the last ``KEPT_DELETES``) completes an insert read after it, an insert read first
  waits there for its delete.

The database is in WAL mode. The transactions that hand out versions are committed
with ``synchronous=FULL``, the others with ``NORMAL``: a record is sent only after the
versions of its page are handed out, and that commit puts every earlier transaction of
the write-ahead log on disk with it, so what a record was computed from is on disk before
it is sent, while a connector catching up (its records deferred) does not wait for a disk
flush per batch. A catching-up connector's batches share one transaction (``batch``: a
savepoint each, committed by ``commit_held``), so a page changed by many batches is
written once. Within a transaction or batch, rows, links and pending keys are written in
bulk at its end (reads see them before). Memory stays bounded by SQLite's page cache
(``cache_size``) and the caches of ``CACHED`` rows and key lists, whatever the tables'
sizes.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from cdc.errors import TerminalError
from cdc.flock import take_flock
from cdc.log import NO_POSITION, Position, TopicPartition
from derived.join_build import Keyed

log = logging.getLogger(__name__)

Table = tuple[str, str]
LinkValue = int | str | bytes  # join values as ``set_links`` holds them (``link_value``)

LOCK_WAIT_S = 60.0  # how long a store waits for a process on its way out to let go
CACHE_KIB = 32 * 1024
CACHED = 20_000  # rows, and key lists of join values, kept decoded in memory
KEPT_DELETES = 100_000  # deleted rows kept for the insert of a key change read after them
_LOADING = "loading:"  # ``meta`` names of the views an initial load marks at its end

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS rows (tbl TEXT NOT NULL, key BLOB NOT NULL, row BLOB NOT NULL,"
    " lsn INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (tbl, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS truncated (tbl TEXT PRIMARY KEY, lsn INTEGER NOT NULL,"
    " seq INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS link_sets (id INTEGER PRIMARY KEY, tbl TEXT NOT NULL,"
    " cols TEXT NOT NULL, UNIQUE (tbl, cols))",
    # val has no declared type: SQLite keeps each value as given (integer, text or blob)
    "CREATE TABLE IF NOT EXISTS set_links (set_id INTEGER NOT NULL, val NOT NULL,"
    " key BLOB NOT NULL, PRIMARY KEY (set_id, val, key)) WITHOUT ROWID",
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


def columns_id(columns: Sequence[str]) -> str:
    """How a set of join columns is named in the store (a JSON array)."""
    return orjson.dumps(list(columns)).decode()


def key_bytes(key: dict[str, Any]) -> bytes:
    """The stored form of a row's key: its JSON (columns in the event's order), after one
    letter when its first value is a non-negative integer (``a``: one digit, ``b``: two,
    ...). The store's tables are ordered by key, and JSON text orders
    ``{"id":10}`` before ``{"id":9}``: the letter puts keys of one column in the order of
    their numbers, so the rows of neighbouring ids (one order's items, one customer's
    orders) share pages. ``key_json`` gives the JSON back."""
    made = orjson.dumps(key)
    first = next(iter(key.values()), None)
    if type(first) is int and first >= 0 and (digits := len(str(first))) <= _KEY_DIGITS:
        return b"%c%b" % (_KEY_LETTERS + digits, made)
    return _compact(made)


def key_json(stored: bytes) -> bytes:
    """The JSON of a key stored as ``key_bytes`` made it."""
    return stored if stored[0] == _KEY_JSON else stored[1:]


def _stored_again(stored: bytes) -> bytes:
    """A key stored as its JSON alone (a store from before ``key_bytes``'s letters) in
    today's form; one in today's form as it is."""
    return key_bytes(orjson.loads(stored)) if stored[0] == _KEY_JSON else stored


_KEY_JSON = ord("{")
_KEY_LETTERS = ord("a") - 1  # + the number of digits: a letter before "{"
_KEY_DIGITS = 26
_KEY_ORDER = "key_order"  # ``meta``: the store's keys are in ``key_bytes``'s form
_REKEY = (  # a store's keys in ``key_bytes``'s form (``_stored_again``)
    "UPDATE rows SET key = stored_again(key)",
    "UPDATE set_links SET key = stored_again(key)",
    "UPDATE pending SET key = stored_again(key)",
    "UPDATE incomplete SET key = stored_again(key)",
)


def _compact(made: bytes) -> bytes:
    """``made`` (from orjson, whose bytes keep a buffer of about 1 KiB however short the
    JSON) copied to a bytes object of its own length, to be kept in a cache."""
    return made.decode().encode()


class StoreTakenError(TerminalError):
    """Another process holds the join state store (``JoinStore``'s lock)."""


class HeldBatchesLost(Exception):
    """The batches held open in the store were undone (their commit, or a later batch,
    failed): the store is back at its last commit, behind what was applied."""


class JoinStore:
    """The state of one connector's joined views (see the module docstring)."""

    def __init__(self, path: Path, indexes: Iterable[tuple[Table, tuple[str, ...]]],
                 lock_wait_s: float = LOCK_WAIT_S) -> None:
        """Open (or create) the store at ``path``, held by this process alone until
        ``close`` (``StoreTakenError`` if another still holds it after ``lock_wait_s``
        seconds); ``indexes``: the ``(table, columns)`` whose values the joins look rows
        up by."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        lock = take_flock(path.with_name(path.name + ".lock"), lock_wait_s,
                          f"the join state store {path} is held by another process")
        if lock is None:
            raise StoreTakenError(
                f"the join state store {path} is held by another process: a connector of "
                "the same name sharing its join_state_dir, or one of a cdc run that has not "
                "stopped; stop that process, or give each connector its own join_state_dir")
        self._lock = lock
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except BaseException:
            os.close(lock)
            raise
        self._rows: OrderedDict[tuple[str, bytes], dict[str, Any] | None] = OrderedDict()
        # the keys holding each join value of each set (a dict as an ordered set: a
        # customer's orders can be many, and keys come and go one at a time)
        self._keys: OrderedDict[tuple[int, LinkValue], dict[bytes, None]] = OrderedDict()
        self._truncated: dict[str, Position] = {}
        # written at the commit: rows (None: deleted), links (True: added), pending keys
        # (bytes: a loaded row's JSON, ``put_loaded``)
        self._row_writes: dict[tuple[str, bytes],
                               tuple[dict[str, Any] | bytes | None, Position]] = {}
        self._link_writes: dict[tuple[int, LinkValue], dict[bytes, bool]] = {}
        self._pending_writes: set[tuple[str, bytes]] = set()
        # each table's join column sets: (set number, columns); the numbers by set
        self._indexes: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
        self._set_ids: dict[tuple[str, str], int] = {}
        self._set_of: dict[tuple[Table, tuple[str, ...]], int] = {}  # ``_set_id``'s answers
        self._held = False  # a transaction is open across batches (``batch``)
        # an initial load under way links its rows when it ends (``begin_load``); None:
        # unknown after an undone transaction (``_deferring_links`` reads it again)
        self._links_deferred: bool | None = None
        try:
            self.reindexed = self._prepare(sorted(set(indexes)))
        except BaseException:
            self.close()
            raise

    def _prepare(self, indexes: list[tuple[Table, tuple[str, ...]]]) -> set[str]:
        """Set the database up (its schema, the keys' form, the indexes); the tables
        indexed anew (``_reindex``)."""
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        for statement in _SCHEMA:
            self._db.execute(statement)
        self._db.create_function("link_of", 2, _link_of, deterministic=True)
        self._order_keys()
        return self._reindex(indexes)

    def _order_keys(self) -> None:
        """Put the keys of a store written before ``key_bytes``'s letters in their form
        (once: ``meta`` then says so)."""
        if self._db.execute("SELECT 1 FROM meta WHERE name = ?", (_KEY_ORDER,)).fetchone():
            return
        if self._db.execute("SELECT 1 FROM rows LIMIT 1").fetchone():
            log.warning("the join state store %s was written by an earlier release: storing "
                        "its keys in the order of their numbers (once; minutes for millions "
                        "of rows)", self.path)
        self._db.create_function("stored_again", 1, _stored_again, deterministic=True)
        with self.transaction():
            for statement in _REKEY:
                self._db.execute(statement)
            self._db.execute("INSERT INTO meta (name, value) VALUES (?, 1)", (_KEY_ORDER,))

    def _reindex(self, indexes: list[tuple[Table, tuple[str, ...]]]) -> set[str]:
        """Make ``set_links`` index exactly the configured join columns (a join's ``on``
        changed since the store was written: its links are built again from the stored
        rows); the tables whose stored rows were indexed anew or dropped from an index."""
        configured = {(table_id(table), columns_id(columns)): columns
                      for table, columns in indexes}
        recorded = {(tbl, cols): set_id for set_id, tbl, cols in
                    self._db.execute("SELECT id, tbl, cols FROM link_sets").fetchall()}
        earlier = self._earlier_layout()
        changed: set[str] = set()
        if set(recorded) != set(configured) or earlier is not None:
            with self.transaction():
                for (tbl, cols), set_id in list(recorded.items()):
                    if (tbl, cols) in configured:
                        continue
                    if self._db.execute("DELETE FROM set_links WHERE set_id = ?",
                                        (set_id,)).rowcount:
                        changed.add(tbl)
                    self._db.execute("DELETE FROM link_sets WHERE id = ?", (set_id,))
                    del recorded[tbl, cols]
                linked_before = set() if earlier is None else earlier
                self._db.execute("DROP TABLE IF EXISTS links")
                self._db.execute("DROP TABLE IF EXISTS indexes")
                changed.update(tbl for tbl, cols in linked_before if (tbl, cols) not in configured)
                for tbl, cols in configured:
                    if (tbl, cols) not in recorded:
                        recorded[tbl, cols] = self._index_rows(tbl, cols)
                        if (tbl, cols) not in linked_before and self._db.execute(
                                "SELECT 1 FROM rows WHERE tbl = ? LIMIT 1", (tbl,)).fetchone():
                            changed.add(tbl)
        for (tbl, cols), columns in configured.items():
            self._set_ids[tbl, cols] = recorded[tbl, cols]
            self._indexes.setdefault(tbl, []).append((recorded[tbl, cols], columns))
        return changed

    def _earlier_layout(self) -> set[tuple[str, str]] | None:
        """The ``(tbl, cols)`` a store written before ``link_sets`` indexed (in its
        ``links`` and ``indexes`` tables, dropped by ``_reindex``); ``None`` when the
        store has no such tables."""
        tables = {name for (name,) in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN "
            "('links', 'indexes')")}
        if not tables:
            return None
        found: set[tuple[str, str]] = set()
        if "indexes" in tables:
            found.update(self._db.execute("SELECT tbl, cols FROM indexes").fetchall())
        if "links" in tables:
            found.update(self._db.execute("SELECT DISTINCT tbl, cols FROM links").fetchall())
        return found

    def _index_rows(self, tbl: str, cols: str) -> int:
        """Number a join column set and link the stored rows of ``tbl`` by its columns
        (``cols``); its number."""
        set_id = int(self._db.execute("INSERT INTO link_sets (tbl, cols) VALUES (?, ?) "
                                      "RETURNING id", (tbl, cols)).fetchone()[0])
        self._link_rows(set_id, tbl, cols)
        return set_id

    def _link_rows(self, set_id: int, tbl: str, cols: str) -> None:
        """Add the links of set ``set_id`` (``tbl`` by the columns ``cols``) of every stored
        row of ``tbl``, in the index's order (SQLite sorts them, on disk when they are
        many). ``link_of`` runs once a row: a NULL join value (no link) breaks ``val``'s
        NOT NULL, so ``OR IGNORE`` skips its row (a ``WHERE`` on it would call it twice)."""
        self._db.execute(
            "INSERT OR IGNORE INTO set_links (set_id, val, key) SELECT ?, link_of(row, ?), "
            "key FROM rows WHERE tbl = ? ORDER BY 2, 3", (set_id, cols, tbl))

    def loading(self) -> set[str]:
        """The views whose records an initial load marks all at once when it ends
        (``begin_load``), not one event at a time."""
        return {name[len(_LOADING):] for (name,) in self._db.execute(
            "SELECT name FROM meta WHERE substr(name, 1, ?) = ?", (len(_LOADING), _LOADING))}

    def begin_load(self, targets: Iterable[str]) -> None:
        """In a transaction or batch of a store that applied nothing yet: the records of
        ``targets`` are not marked per event while the initial load runs; ``end_load``
        marks every one (a crash before it leaves the mark: the next start ends it)."""
        self._db.executemany("INSERT OR IGNORE INTO meta (name, value) VALUES (?, 0)",
                             [(_LOADING + target,) for target in targets])
        self._links_deferred = True

    def _deferring_links(self) -> bool:
        """True while an initial load runs: ``put`` neither reads nor writes links (its
        rows are new), ``end_load`` links every stored row at once, in the index's order
        (a load's links written a batch at a time land all over the index)."""
        if self._links_deferred is None:
            self._links_deferred = bool(self.loading())
        return self._links_deferred

    def end_load(self, roots: Mapping[str, Table]) -> int:
        """In a transaction or batch: mark the record of every stored row of each loading
        view's root table (``roots``: target → table) pending, and end the load; how
        many were marked."""
        self._write_buffered()  # within the transaction: the query sees this one's rows
        deferred = self._deferring_links()
        marked = 0
        for target in sorted(self.loading()):
            table = roots.get(target)
            if table is not None:  # else a view removed from the config since
                marked += self._db.execute(
                    "INSERT OR IGNORE INTO pending (target, key) SELECT ?, key FROM rows "
                    "WHERE tbl = ?", (target, table_id(table))).rowcount
        self._db.execute("DELETE FROM meta WHERE substr(name, 1, ?) = ?",
                         (len(_LOADING), _LOADING))
        if deferred:
            self._db.execute("DELETE FROM set_links")
            for set_id, tbl, cols in self._db.execute(
                    "SELECT id, tbl, cols FROM link_sets").fetchall():
                self._link_rows(set_id, tbl, cols)
            self._keys.clear()
            self._links_deferred = False
        return marked

    def mark_every_row(self, target: str, table: Table) -> int:
        """Mark the record of every stored row of ``table`` in ``target`` to be written;
        how many."""
        with self.transaction():
            return int(self._db.execute(
                "INSERT OR IGNORE INTO pending (target, key) SELECT ?, key FROM rows "
                "WHERE tbl = ?", (target, table_id(table))).rowcount)

    def close(self) -> None:
        """Close the database (batches still held are undone: the store stays behind,
        never wrong)."""
        self._held = False
        try:
            self._db.close()
        finally:
            if self._lock >= 0:
                os.close(self._lock)  # another process may open the store now
                self._lock = -1

    @contextmanager
    def transaction(self, durable: bool = False) -> Iterator[None]:
        """One atomic change of the store; ``durable``: on disk, with every transaction
        before it, when this returns (otherwise at the next durable one). Batches held
        open (``batch``) must be committed first (``commit_held``)."""
        if self._held:
            raise RuntimeError("a store transaction began while batches are held open")
        self._db.execute("PRAGMA synchronous=" + ("FULL" if durable else "NORMAL"))
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._write_buffered()
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            self._forget_unwritten()
            raise
        self._db.execute("COMMIT")

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One atomic change of the store, in a transaction held open across batches
        until ``commit_held``: many batches then cost one commit (each dirty page written
        once, not once a batch). A failed batch is undone alone (a savepoint), the held
        ones stay; ``HeldBatchesLost`` when SQLite undid the whole transaction."""
        if not self._held:
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("BEGIN IMMEDIATE")
            self._held = True
        self._db.execute("SAVEPOINT batch")
        try:
            yield
            self._write_buffered()
        except BaseException as exc:
            self._forget_unwritten()
            if not self._db.in_transaction:  # an I/O error, a full disk: all undone
                self._held = False
                raise HeldBatchesLost(exc) from exc
            self._db.execute("ROLLBACK TO batch")
            self._db.execute("RELEASE batch")
            raise
        self._db.execute("RELEASE batch")

    @property
    def held(self) -> bool:
        """True while batches are held open, not yet committed."""
        return self._held

    def commit_held(self) -> None:
        """Commit the batches held open, if any; ``HeldBatchesLost`` when that fails (they
        are undone)."""
        if not self._held:
            return
        self._held = False
        try:
            self._db.execute("COMMIT")
        except BaseException as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            self._forget_unwritten()
            raise HeldBatchesLost(exc) from exc

    def _forget_unwritten(self) -> None:
        """Drop the buffered writes and the caches (they may hold undone changes)."""
        self._rows.clear()
        self._keys.clear()
        self._truncated.clear()
        self._links_deferred = None
        self._row_writes.clear()
        self._link_writes.clear()
        self._pending_writes.clear()

    def _write_buffered(self) -> None:
        """Write the rows, links and pending keys changed in this transaction."""
        rows, self._row_writes = self._row_writes, {}
        self._db.executemany("DELETE FROM rows WHERE tbl = ? AND key = ?",
                             [where for where, (row, _) in rows.items() if row is None])
        self._db.executemany(
            "INSERT OR REPLACE INTO rows (tbl, key, row, lsn, seq) VALUES (?, ?, ?, ?, ?)",
            [(*where, row if type(row) is bytes else orjson.dumps(row), *position)
             for where, (row, position) in rows.items() if row is not None])
        links, self._link_writes = self._link_writes, {}
        changes = sorted(((set_id, value, key, added) for (set_id, value), keys in links.items()
                          for key, added in keys.items()), key=_index_order)
        self._db.executemany("DELETE FROM set_links WHERE set_id = ? AND val = ? AND key = ?",
                             [change[:3] for change in changes if not change[3]])
        self._db.executemany("INSERT OR IGNORE INTO set_links (set_id, val, key) VALUES "
                             "(?, ?, ?)", [change[:3] for change in changes if change[3]])
        pending, self._pending_writes = self._pending_writes, set()
        self._db.executemany("INSERT OR IGNORE INTO pending (target, key) VALUES (?, ?)",
                             sorted(pending))

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
        written = self._row_writes.get((tbl, key))
        if written is not None:
            row = written[0]
            return orjson.loads(row) if isinstance(row, bytes) else row
        try:
            return self._rows[tbl, key]
        except KeyError:
            pass
        found = self._db.execute("SELECT row FROM rows WHERE tbl = ? AND key = ?",
                                 (tbl, key)).fetchone()
        row = None if found is None else orjson.loads(found[0])
        _remember(self._rows, (tbl, key), row)
        return row

    def preload(self, table: Table, keys: Iterable[bytes]) -> None:
        """Read the stored rows of ``keys`` together into the cache (``row`` then finds
        them without a query each)."""
        tbl = table_id(table)
        wanted = {key for key in keys
                  if (tbl, key) not in self._row_writes and (tbl, key) not in self._rows}
        if not wanted:
            return
        found = self.rows_of(table, wanted)
        for key in wanted:
            _remember(self._rows, (tbl, key), found.get(key))

    def put(self, table: Table, key: bytes, row: dict[str, Any] | None,
            old: dict[str, Any] | None, position: Position) -> None:
        """Store ``row`` as the row of ``key`` at ``position`` (``None``: delete it);
        ``old`` is what the store held (its links are replaced; while an initial load
        runs, unused: ``end_load`` links the rows)."""
        tbl = table_id(table)
        if not self._deferring_links():
            for set_id, columns in self._indexes.get(tbl, ()):
                was = row_link_value(old, columns)
                now = row_link_value(row, columns)
                if was != now:
                    if was is not None:
                        self._link(set_id, was, key, False)
                    if now is not None:
                        self._link(set_id, now, key, True)
        _remember(self._rows, (tbl, key), row)
        self._row_writes[tbl, key] = (row, position)

    def put_loaded(self, table: Table, key: bytes, row: bytes, position: Position) -> None:
        """``put`` of a row an initial load read (its JSON, as stored): links are
        deferred to ``end_load``, and the row is not kept decoded."""
        if not self._deferring_links():
            raise RuntimeError("a loaded row outside an initial load (begin_load)")
        tbl = table_id(table)
        self._rows.pop((tbl, key), None)
        self._row_writes[tbl, key] = (row, position)

    def _link(self, set_id: int, value: LinkValue, key: bytes, added: bool) -> None:
        """Add ``key`` to (or drop it from) the keys holding ``value`` in set ``set_id``."""
        self._link_writes.setdefault((set_id, value), {})[key] = added
        cached = self._keys.get((set_id, value))
        if cached is not None:
            if added:
                cached[key] = None
            else:
                cached.pop(key, None)

    def position(self, table: Table, key: bytes) -> Position:
        """The source position of the stored row of ``key`` (0/0: none)."""
        written = self._row_writes.get((table_id(table), key))
        if written is not None:
            return NO_POSITION if written[0] is None else written[1]
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
        self._write_buffered()  # within the transaction: the query sees this one's rows
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
                found.append((orjson.loads(key_json(key)), row))
        return found

    def matching_keys(self, table: Table, columns: tuple[str, ...],
                      values: tuple[Any, ...]) -> list[bytes]:
        """The keys of the rows ``matching`` would return."""
        value = link_value(values)
        where = (self._set_id(table, columns),
                 _compact(value) if isinstance(value, bytes) else value)
        keys = self._keys.get(where)
        if keys is None:
            keys = self._keys_read(where, [key for (key,) in self._db.execute(
                "SELECT key FROM set_links WHERE set_id = ? AND val = ?", where)])
        return list(keys)

    def _keys_read(self, where: tuple[int, LinkValue], stored: Iterable[bytes]
                   ) -> dict[bytes, None]:
        """The keys holding ``where`` (set, value): ``stored`` with this transaction's
        unwritten links, kept in the cache."""
        keys = dict.fromkeys(stored)
        for key, added in self._link_writes.get(where, {}).items():
            if added:
                keys[key] = None
            else:
                keys.pop(key, None)
        _remember(self._keys, where, keys)
        return keys

    def preload_keys(self, table: Table, columns: tuple[str, ...],
                     values: Iterable[tuple[Any, ...]]) -> None:
        """Read the keys holding each of ``values`` in ``columns`` of ``table`` together
        into the cache (``matching_keys`` then finds them without a query each)."""
        set_id = self._set_id(table, columns)
        wanted: dict[LinkValue, None] = {}
        for values_ in values:
            value = link_value(values_)
            if isinstance(value, bytes):
                value = _compact(value)
            if (set_id, value) not in self._keys:
                wanted[value] = None
        if not wanted:
            return
        found: dict[LinkValue, list[bytes]] = {value: [] for value in wanted}
        for value, key in self._db.execute(*_links_of(set_id, wanted)):
            keys = found.get(value)
            if keys is not None:
                keys.append(key)
        for value, keys in found.items():
            self._keys_read((set_id, value), keys)

    def rows_of(self, table: Table, keys: Iterable[bytes]) -> dict[bytes, dict[str, Any]]:
        """The stored rows of ``keys`` (those there are), read together (committed rows:
        outside a transaction)."""
        return {key: orjson.loads(row) for key, row in self._db.execute(
            "SELECT key, row FROM rows WHERE tbl = ? AND key IN "
            "(SELECT CAST(value AS BLOB) FROM json_each(?))",
            (table_id(table), _json_list(keys)))}

    def _set_id(self, table: Table, columns: tuple[str, ...]) -> int:
        """The number of the join column set ``columns`` of ``table``."""
        try:
            return self._set_of[table, columns]
        except KeyError:
            pass
        try:
            found = self._set_of[table, columns] = self._set_ids[table_id(table),
                                                                 columns_id(columns)]
        except KeyError:
            raise KeyError(f"the join store does not index {table_id(table)} by "
                           f"{columns_id(columns)}") from None
        return found

    def matching_many(self, table: Table, columns: tuple[str, ...],
                      values: Iterable[LinkValue]) -> dict[LinkValue, list[Keyed]]:
        """``(key, row)`` of the rows of ``table`` whose ``columns`` hold each of ``values``
        (``link_value``s), read together (committed rows: outside a transaction), keys
        and rows decoded in one call each."""
        found = self._db.execute(
            "SELECT l.val, l.key, rows.row FROM set_links AS l JOIN rows"
            " ON rows.tbl = ? AND rows.key = l.key"
            " WHERE l.set_id = ? AND l.val IN (SELECT value FROM json_each(?)"
            " UNION ALL SELECT CAST(value AS BLOB) FROM json_each(?))",
            (table_id(table), self._set_id(table, columns), *_values_in(values))).fetchall()
        if not found:
            return {}
        keys = orjson.loads(b"[%b]" % b",".join([key_json(key) for _, key, _ in found]))
        rows = orjson.loads(b"[%b]" % b",".join([row for _, _, row in found]))
        matched: dict[LinkValue, list[Keyed]] = {}
        for (value, _, _), key, row in zip(found, keys, rows, strict=True):
            keyed = matched.get(value)
            if keyed is None:
                matched[value] = [(key, row)]
            else:
                keyed.append((key, row))
        return matched

    def add_pending(self, target: str, keys: Iterable[bytes]) -> None:
        """Mark the records of ``keys`` in ``target`` to be written (at the commit)."""
        self._pending_writes.update((target, key) for key in keys)

    def pending(self) -> dict[str, list[bytes]]:
        """The keys to write, per target, in key order."""
        found: dict[str, list[bytes]] = {}
        for target, key in self._db.execute("SELECT target, key FROM pending"):
            found.setdefault(target, []).append(key)
        return found

    def has_pending(self) -> bool:
        """True when some record is waiting to be written."""
        return self._db.execute("SELECT 1 FROM pending LIMIT 1").fetchone() is not None

    def pending_count(self) -> int:
        """How many records are waiting to be written."""
        return int(self._db.execute("SELECT count(*) FROM pending").fetchone()[0])

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
        self._pending_writes.clear()
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


def row_link_value(row: dict[str, Any] | None, columns: tuple[str, ...]) -> LinkValue | None:
    """The ``link_value`` of ``columns`` in ``row``; ``None`` without a row or when one is
    NULL (a NULL joins nothing)."""
    if row is None:
        return None
    if len(columns) == 1:  # the usual join: one column
        value = row.get(columns[0])
        return None if value is None else _one_link_value(value)
    values = [row.get(column) for column in columns]
    return None if any(value is None for value in values) else link_value(values)


def _links_of(set_id: int, values: Iterable[LinkValue]) -> tuple[str, tuple[Any, ...]]:
    """The query (and its parameters) of the ``(val, key)`` links of set ``set_id``
    holding any of ``values`` (``link_value``s)."""
    return ("SELECT val, key FROM set_links WHERE set_id = ? AND val IN (SELECT value FROM "
            "json_each(?) UNION ALL SELECT CAST(value AS BLOB) FROM json_each(?))",
            (set_id, *_values_in(values)))


def _values_in(values: Iterable[LinkValue]) -> tuple[str, str]:
    """``values`` (``link_value``s) as the two JSON arrays a ``val IN`` query takes: the
    integers and texts as they are, the JSON arrays as the strings of their blobs."""
    plain: list[int | str] = []
    arrays: list[bytes] = []
    for value in values:
        if isinstance(value, bytes):
            arrays.append(value)
        else:
            plain.append(value)
    return orjson.dumps(plain).decode(), _json_list(arrays)


@lru_cache(maxsize=64)
def _columns_of(cols: str) -> tuple[str, ...]:
    """The columns named by ``columns_id``'s JSON array ``cols``."""
    return tuple(orjson.loads(cols))


def _link_of(row: bytes, cols: str) -> LinkValue | None:
    """SQL's ``link_of(row, cols)``: the ``row_link_value`` of a stored row (JSON) by the
    columns ``cols`` (``columns_id``)."""
    return row_link_value(orjson.loads(row), _columns_of(cols))


def _one_link_value(value: Any) -> LinkValue:
    """``link_value((value,))``: the join value of one column (not NULL)."""
    if type(value) is str or (type(value) is int and _INT64_MIN <= value <= _INT64_MAX):
        return value
    return orjson.dumps([value])


def link_value(values: Sequence[Any]) -> LinkValue:
    """How join ``values`` are stored in ``set_links``: one integer (a 64-bit one, not a
    boolean) or text value as itself, anything else as a JSON array. SQLite never takes
    an integer, a text and a blob for equal, so each way stands for one list of values."""
    if len(values) == 1:
        value = values[0]
        if type(value) is str or (type(value) is int and _INT64_MIN <= value <= _INT64_MAX):
            return value
    return orjson.dumps(values)


_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1
_KIND = {int: 0, str: 1, bytes: 2}  # SQLite's order of integers, text and blobs


def _index_order(link: tuple[int, LinkValue, bytes, *tuple[bool, ...]]
                 ) -> tuple[int, int, LinkValue, bytes]:
    """``(set_id, value, key[, added])`` in the order of the links' index, so that the
    inserts and deletes of a batch land side by side."""
    return link[0], _KIND[type(link[1])], link[1], link[2]


def _json_list(items: Iterable[bytes]) -> str:
    """``items`` (UTF-8 JSON texts) as a JSON array of strings, for ``json_each``."""
    return orjson.dumps([item.decode() for item in items]).decode()
