"""The join store's links: join values of every kind find exactly the rows whose values
are equal as JSON, and a store written in the earlier layout (``links``, ``indexes``)
is indexed again in the new one without its records changing."""

from __future__ import annotations

import contextlib
import random
import sqlite3
from pathlib import Path
from typing import Any

import orjson

from cdc.log import Position
from connectors.joins import JoinStage, JoinStore
from connectors.joins.stage import store_indexes
from connectors.joins.store import key_bytes, key_json, link_value
from derived import JoinedView

ITEMS = ("public", "items")
# values that Python or SQLite could take for equal although their JSON differs
VALUES: list[Any] = [1, True, 1.0, "1", "01", 0, False, -1, 2 ** 63 - 1, -(2 ** 63),
                     "é", "", "[1]", [1], {"a": 1}, 1.5, "x" * 40]


def _row(key: int, value: Any, other: Any) -> dict[str, Any]:
    return {"id": key, "ref": value, "kind": other}


def test_each_kind_of_value_finds_the_rows_equal_to_it_as_json(tmp_path: Path) -> None:
    by_one, by_two = ("ref",), ("ref", "kind")
    store = JoinStore(tmp_path / "joins.sqlite", [(ITEMS, by_one), (ITEMS, by_two)])
    rnd = random.Random(7)
    rows = {key: _row(key, rnd.choice(VALUES), rnd.choice(["a", 2, None]))
            for key in range(300)}
    with store.transaction():
        for key, row in rows.items():
            store.put(ITEMS, key_bytes({"id": key}), row, None, Position(1, key))
    for columns in (by_one, by_two):
        expected: dict[bytes, set[bytes]] = {}
        for key, row in rows.items():
            values = [row[column] for column in columns]
            if None not in values:
                expected.setdefault(orjson.dumps(values), set()).add(key_bytes({"id": key}))
        assert len(expected) > len(VALUES) / 2
        asked = [link_value(orjson.loads(json)) for json in expected]
        found = store.matching_many(ITEMS, columns, [*asked, link_value([12345])])
        assert {orjson.dumps([row[c] for c in columns]): {key_bytes(k) for k, _ in keyed}
                for keyed in found.values() for k, row in keyed} == expected
        for json, keys in expected.items():
            assert set(store.matching_keys(ITEMS, columns, tuple(orjson.loads(json)))) == keys
    store.close()


def test_keys_preloaded_together_are_those_each_query_finds(tmp_path: Path) -> None:
    by_one, by_two = ("ref",), ("ref", "kind")
    path = tmp_path / "joins.sqlite"
    store = JoinStore(path, [(ITEMS, by_one), (ITEMS, by_two)])
    rnd = random.Random(11)
    rows = {key: _row(key, rnd.choice(VALUES), rnd.choice(["a", 2, None])) for key in range(200)}
    with store.transaction():
        for key, row in rows.items():
            store.put(ITEMS, key_bytes({"id": key}), row, None, Position(1, key))
    store.close()
    asked = {columns: [tuple(v) for v in {orjson.dumps([row[c] for c in columns]): [
        row[c] for c in columns] for row in rows.values()}.values() if None not in v]
        + [(12345,) * len(columns)] for columns in (by_one, by_two)}
    truth = JoinStore(path, [(ITEMS, by_one), (ITEMS, by_two)])
    expected = {columns: [sorted(truth.matching_keys(ITEMS, columns, values)) for values in
                          wanted] for columns, wanted in asked.items()}
    truth.close()
    store = JoinStore(path, [(ITEMS, by_one), (ITEMS, by_two)])
    queries: list[str] = []
    with store.batch():  # this batch's links, not written yet, count too
        moved = {**rows[0], "ref": "moved"}
        store.put(ITEMS, key_bytes({"id": 0}), moved, rows[0], Position(2, 0))
        for columns, wanted in asked.items():
            store.preload_keys(ITEMS, columns, [*wanted, ("moved",) * len(columns)])
        store._db.set_trace_callback(queries.append)
        for columns, wanted in asked.items():
            old = [[key for key in keys if key != key_bytes({"id": 0}) or
                    None in [rows[0][c] for c in columns] or
                    values != tuple(rows[0][c] for c in columns)]
                   for values, keys in zip(wanted, expected[columns], strict=True)]
            found = [sorted(store.matching_keys(ITEMS, columns, values)) for values in wanted]
            assert found == old
        assert store.matching_keys(ITEMS, by_one, ("moved",)) == [key_bytes({"id": 0})]
        assert queries == []
        store._db.set_trace_callback(None)
    store.close()


def _earlier_store(path: Path) -> None:
    """A store of items indexed by order and product, as written before ``link_sets``."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE rows (tbl TEXT NOT NULL, key BLOB NOT NULL, row BLOB NOT "
                   "NULL, lsn INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (tbl, key))"
                   " WITHOUT ROWID")
        db.execute("CREATE TABLE links (tbl TEXT NOT NULL, cols TEXT NOT NULL, val BLOB NOT "
                   "NULL, key BLOB NOT NULL, PRIMARY KEY (tbl, cols, val, key)) WITHOUT ROWID")
        db.execute("CREATE TABLE indexes (tbl TEXT NOT NULL, cols TEXT NOT NULL, PRIMARY KEY "
                   "(tbl, cols)) WITHOUT ROWID")
        for key in range(10):
            row = {"id": key, "order_id": key // 3, "product_id": f"p{key % 2}"}
            db.execute("INSERT INTO rows VALUES ('public.items', ?, ?, 1, ?)",
                       (orjson.dumps({"id": key}), orjson.dumps(row), key))
            for column in ("order_id", "product_id"):
                db.execute("INSERT INTO links VALUES ('public.items', ?, ?, ?)",
                           (f'["{column}"]', orjson.dumps([row[column]]),
                            orjson.dumps({"id": key})))
        db.executemany("INSERT INTO indexes VALUES ('public.items', ?)",
                       [('["order_id"]',), ('["product_id"]',)])


def test_a_store_of_the_earlier_layout_is_indexed_again_with_its_records_unchanged(
        tmp_path: Path) -> None:
    path = tmp_path / "joins.sqlite"
    _earlier_store(path)
    store = JoinStore(path, [(ITEMS, ("order_id",)), (ITEMS, ("product_id",))])
    assert store.reindexed == set()  # the same links, in another layout: no record changes
    assert store.matching_keys(ITEMS, ("order_id",), (1,)) == [
        key_bytes({"id": key}) for key in (3, 4, 5)]
    assert sorted(store.matching_keys(ITEMS, ("product_id",), ("p1",))) == sorted(
        key_bytes({"id": key}) for key in (1, 3, 5, 7, 9))
    tables = {name for (name,) in store._db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "links" not in tables and "indexes" not in tables
    store.close()
    assert JoinStore(path, [(ITEMS, ("order_id",)), (ITEMS, ("product_id",))]
                     ).reindexed == set()


def test_an_earlier_store_indexing_a_set_no_longer_joined_has_its_records_written(
        tmp_path: Path) -> None:
    path = tmp_path / "joins.sqlite"
    _earlier_store(path)
    store = JoinStore(path, [(ITEMS, ("order_id",))])
    assert store.reindexed == {"public.items"}
    assert store.matching_keys(ITEMS, ("order_id",), (3,)) == [key_bytes({"id": 9})]
    store.close()


def test_lookups_of_equal_python_values_of_other_json_types_find_their_own_rows(
        tmp_path: Path) -> None:
    """A page's records remember each lookup by its values and their types: ``1``,
    ``true`` and ``1.0`` are equal in Python, not in JSON."""
    view = JoinedView.model_validate({
        "source": "public.orders", "target": "orders",
        "lookups": [{"name": "customer", "source": "public.customers",
                     "on": {"customer_id": "id"}, "fields": ["name"]}]})
    store = JoinStore(tmp_path / "joins.sqlite", store_indexes([view]))
    stage = JoinStage([view], store)
    customers, orders = ("public", "customers"), ("public", "orders")
    refs: list[Any] = [1, True, 1.0, "1", 1, True, 1.0]
    with store.transaction():
        for number, ref in enumerate(refs[:4]):
            store.put(customers, key_bytes({"id": ref}), {"id": ref, "name": f"c{number}"},
                      None, Position(1, number))
        for number, ref in enumerate(refs):
            store.put(orders, key_bytes({"id": number}), {"id": number, "customer_id": ref},
                      None, Position(2, number))
    records = stage.records(view, [key_bytes({"id": number}) for number in range(len(refs))])
    assert [record["customer"]["name"] for _, record in records if record is not None] == [
        "c0", "c1", "c2", "c3", "c0", "c1", "c2"]
    store.close()


def test_keys_of_one_integer_column_are_stored_in_the_order_of_their_numbers(
        tmp_path: Path) -> None:
    """Neighbouring ids share the store's pages: ``{"id":10}`` after ``{"id":9}``, as
    numbers, not as JSON text; any key's JSON comes back."""
    numbers = [0, 1, 9, 10, 99, 100, 12345, 2 ** 63 - 1, 2 ** 64 - 1]
    assert sorted(numbers, key=lambda n: key_bytes({"id": n})) == numbers
    keys: list[dict[str, Any]] = [{"id": n} for n in numbers] + [
        {"id": -5}, {"id": True}, {"id": "9"}, {"id": 1.5},
        {"order_id": 12, "line": 3}, {"a": None}]
    for key in keys:
        assert key_json(key_bytes(key)) == orjson.dumps(key)
    store = JoinStore(tmp_path / "joins.sqlite", [(ITEMS, ("order_id",))])
    with store.transaction():
        for number in random.Random(7).sample(range(1, 2001), 2000):
            store.put(ITEMS, key_bytes({"id": number}), {"id": number, "order_id": number // 3},
                      None, Position(1, number))
    stored = [orjson.loads(key_json(key))["id"] for (key,) in store._db.execute(
        "SELECT key FROM rows WHERE tbl = 'public.items'")]  # in the table's key order
    assert stored == list(range(1, 2001))
    assert [key for key, _ in store.matching_many(ITEMS, ("order_id",), [100])[100]] == [
        {"id": 300}, {"id": 301}, {"id": 302}]
    store.close()


def test_a_store_of_keys_as_json_alone_has_them_stored_again_once(tmp_path: Path) -> None:
    """A store written before the keys' letters: its rows, links, pending records and
    waiting inserts are found again by today's keys, and its records are unchanged."""
    path = tmp_path / "joins.sqlite"
    store = JoinStore(path, [(ITEMS, ("order_id",))])
    with store.transaction():
        for number in range(1, 31):
            store.put(ITEMS, key_bytes({"id": number}), {"id": number, "order_id": number // 3},
                      None, Position(1, number))
        store.add_pending("items", [key_bytes({"id": 12})])
        store.wait_for_delete(ITEMS, Position(2, 1), key_bytes({"id": 30}), ["note"])
    store.close()
    with sqlite3.connect(path) as db:  # what the earlier code wrote: the JSON alone
        for statement in ("UPDATE rows SET key = substr(key, 2)",
                          "UPDATE set_links SET key = substr(key, 2)",
                          "UPDATE pending SET key = substr(key, 2)",
                          "UPDATE incomplete SET key = substr(key, 2)"):
            db.execute(statement)
        db.execute("DELETE FROM meta WHERE name = 'key_order'")
    assert b'{"id":12}' in {key for (key,) in sqlite3.connect(path).execute(
        "SELECT key FROM rows")}
    again = JoinStore(path, [(ITEMS, ("order_id",))])
    assert again.reindexed == set()
    assert again.row(ITEMS, key_bytes({"id": 12})) == {"id": 12, "order_id": 4}
    assert again.matching_keys(ITEMS, ("order_id",), (4,)) == [
        key_bytes({"id": number}) for number in (12, 13, 14)]
    assert again.pending() == {"items": [key_bytes({"id": 12})]}
    assert again.waiting_insert(ITEMS, Position(2, 1)) == (key_bytes({"id": 30}), ["note"])
    again.close()
    stored = {key for (key,) in sqlite3.connect(path).execute("SELECT key FROM rows")}
    assert stored == {key_bytes({"id": number}) for number in range(1, 31)}


def _all_links(store: JoinStore) -> list[tuple[Any, ...]]:
    return store._db.execute("SELECT l.cols, s.val, s.key FROM set_links AS s JOIN link_sets "
                             "AS l ON l.id = s.set_id ORDER BY 1, 2, 3").fetchall()


def test_an_initial_load_links_its_rows_when_it_ends(tmp_path: Path) -> None:
    """The load's ``put``s write no links (its rows are new); ``end_load`` links every
    row at once: the same links as rows put one at a time, a key read twice included."""
    indexes = [(ITEMS, ("order_id",)), (ITEMS, ("order_id", "product_id"))]
    rows = [{"id": n, "order_id": n // 3 if n % 10 else None,  # NULL: no link
             "product_id": VALUES[n % len(VALUES)]}
            for n in random.Random(3).sample(range(300), 300)]
    rows.append({"id": 5, "order_id": 700, "product_id": "again"})  # read again, moved
    loaded = JoinStore(tmp_path / "loaded.sqlite", indexes)
    one_by_one = JoinStore(tmp_path / "one.sqlite", indexes)
    with loaded.transaction():
        loaded.begin_load(["items"])
        for number, row in enumerate(rows):
            loaded.put(ITEMS, key_bytes({"id": row["id"]}), row, None, Position(1, number))
    assert _all_links(loaded) == []
    with one_by_one.transaction():
        for number, row in enumerate(rows):
            key = key_bytes({"id": row["id"]})
            one_by_one.put(ITEMS, key, row, one_by_one.row(ITEMS, key), Position(1, number))
    with loaded.transaction():
        assert loaded.end_load({"items": ITEMS}) == 300
    assert _all_links(loaded) == _all_links(one_by_one) != []
    assert loaded.matching_keys(ITEMS, ("order_id",), (700,)) == [key_bytes({"id": 5})]
    with loaded.transaction():  # after the load: each put links its row
        loaded.put(ITEMS, key_bytes({"id": 1000}), {"id": 1000, "order_id": 700}, None,
                   Position(2, 0))
    assert loaded.matching_keys(ITEMS, ("order_id",), (700,)) == [
        key_bytes({"id": 5}), key_bytes({"id": 1000})]


def test_a_load_begun_in_an_undone_batch_leaves_puts_linking(tmp_path: Path) -> None:
    store = JoinStore(tmp_path / "joins.sqlite", [(ITEMS, ("order_id",))])
    with contextlib.suppress(RuntimeError), store.batch():
        store.begin_load(["items"])
        store.put(ITEMS, key_bytes({"id": 1}), {"id": 1, "order_id": 7}, None, Position(1, 0))
        raise RuntimeError("the batch fails")
    with store.batch():
        store.put(ITEMS, key_bytes({"id": 2}), {"id": 2, "order_id": 7}, None, Position(1, 1))
    store.commit_held()
    assert store.loading() == set()
    assert store.matching_keys(ITEMS, ("order_id",), (7,)) == [key_bytes({"id": 2})]
    assert len(_all_links(store)) == 1
