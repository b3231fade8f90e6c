"""The join stage over a real SQLite store: random shop workloads, read in random table
order, keep every record equal to the join of the final rows (``derived.build_record``
over ``RowsInMemory``), batch after batch."""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, cast

import orjson
import pytest

from cdc.log import Consumer, Message, Position, TopicPartition
from cdc.native import CORE
from cdc.plugins.contract import SinkUnavailableError
from connectors.contract import Sink, SinkEvent, SinkStateLostError, WriteResult
from connectors.joins import JoinedSink, JoinStage, JoinStore
from connectors.joins.sink import SplitJoinError
from connectors.joins.stage import store_indexes
from connectors.joins.store import key_bytes, key_json
from derived import JoinedView, RowsInMemory, build_record

SHOP = JoinedView.model_validate({
    "source": "public.orders", "target": "orders", "exclude": ["note"],
    "computed": {"label": "concat('order ', id)"},
    "lookups": [{"name": "customer", "source": "public.customers",
                 "on": {"customer_id": "id"}, "fields": ["name", "email"]}],
    "nested": [{"name": "items", "source": "public.items", "on": {"id": "order_id"},
                "order_by": ["line"], "filter": "qty > 0",
                "lookups": [{"name": "product", "source": "public.products",
                             "on": {"product_id": "id"}, "fields": ["title"]}]}],
})

REQUIRED = JoinedView.model_validate({
    "source": "public.orders", "target": "orders_required",
    "lookups": [{"name": "customer", "source": "public.customers",
                 "on": {"customer_id": "id"}, "required": True}],
})

Tables = dict[str, dict[int, dict[str, Any]]]


class Shop:
    """A random workload over customers, products, orders and items, as events."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.tables: Tables = {"customers": {}, "products": {}, "orders": {}, "items": {}}
        self.next_id = 1
        self.moved: set[int] = set()
        self.version = 0

    def _row(self, table: str, key: int) -> dict[str, Any]:
        pick = self.random
        ids = {name: list(rows) or [0] for name, rows in self.tables.items()}
        if table == "customers":
            return {"id": key, "name": f"c{pick.randrange(100)}", "email": "x@y"}
        if table == "products":
            return {"id": key, "title": f"p{pick.randrange(100)}"}
        if table == "orders":
            customer = pick.choice(ids["customers"] + [999_999, None])
            return {"id": key, "customer_id": customer, "note": f"n{pick.random()}",
                    "total": "1.50"}
        return {"id": key, "order_id": pick.choice(ids["orders"] + [None]),
                "product_id": pick.choice(ids["products"]), "line": pick.randrange(5),
                "qty": pick.randrange(-1, 3)}

    def events(self, count: int) -> list[tuple[str, dict[str, Any]]]:
        """``count`` changes, applied to ``tables``, as ``(table, event)``."""
        made: list[tuple[str, dict[str, Any]]] = []
        self.moved = set()
        for _ in range(count):
            table = self.random.choice(list(self.tables))
            rows = self.tables[table]
            roll = self.random.random()
            if roll < 0.02:
                rows.clear()
                made.append((table, {"op": "t"}))
                continue
            if not rows or roll < 0.4:
                key, op = self.next_id, "c"
                self.next_id += 1
            else:
                key = self.random.choice(list(rows))
                op = "d" if roll < 0.55 else "u"
            if (op == "d" and table == "orders" and key not in self.moved
                    and self.random.random() < 0.5):
                # a key change: the old key's delete, then the new key's insert at the next
                # position, its unchanged TOAST column (note) left out
                moved = dict(rows.pop(key), id=self.next_id)
                rows[self.next_id] = moved
                self.moved.add(self.next_id)  # not moved again while its insert is unread
                made.append((table, {"op": "d", "key": {"id": key}}))
                made.append((table, {"op": "c", "key": {"id": self.next_id}, "same_txn": True,
                                     "after": {k: v for k, v in moved.items() if k != "note"},
                                     "unchanged": ["note"]}))
                self.next_id += 1
                continue
            if op == "d":
                del rows[key]
                made.append((table, {"op": "d", "key": {"id": key}}))
                continue
            row = self._row(table, key)
            rows[key] = row
            made.append((table, {"op": op, "key": {"id": key}, "after": row}))
        return made

    def sink_events(self, made: list[tuple[str, dict[str, Any]]],
                    raw: bool = True) -> list[SinkEvent]:
        """``made`` as a sink reads them; ``raw``: their messages hold their JSON, as
        the log's do (else none: what the native core reads is left to Python)."""
        events = []
        for table, event in made:
            seq = 0
            if event.pop("same_txn", False):
                seq = 1  # the next position of the same transaction
            else:
                self.version += 1
            event["source"] = {"schema": "public", "table": table}
            message = Message(f"app.public.{table}", 0, self.version, 0, b"",
                              orjson.dumps(event) if raw else b"",
                              Position(self.version, seq), False)
            events.append(SinkEvent(message, event, self.version))
        return events

    def expected(self, view: JoinedView) -> dict[bytes, dict[str, Any]]:
        rows = RowsInMemory({("public", name): [({"id": key}, row) for key, row in table.items()]
                             for name, table in self.tables.items()})
        built = {}
        for key, row in self.tables["orders"].items():
            record = build_record(view, row, rows)
            if record is not None:
                built[orjson.dumps({"id": key})] = record
        return built


def _materialize(stage: JoinStage, documents: dict[str, dict[bytes, dict[str, Any]]]) -> None:
    views = {view.target: view for view in stage.views}
    for target, keys in stage.store.pending().items():
        for key, record in stage.records(views[target], keys):
            if record is None:
                documents[target].pop(key_json(key), None)
            else:
                documents[target][key_json(key)] = record
    with stage.store.transaction():
        stage.store.clear_pending()


@pytest.mark.parametrize("seed", range(12))
def test_records_follow_the_join_of_the_final_rows(tmp_path: Path, seed: int) -> None:
    views = [SHOP, REQUIRED]
    store = JoinStore(tmp_path / "joins.sqlite", store_indexes(views))
    stage = JoinStage(views, store)
    shop = Shop(seed)
    documents: dict[str, dict[bytes, dict[str, Any]]] = {"orders": {}, "orders_required": {}}
    for _ in range(25):
        batch = shop.sink_events(shop.events(shop.random.randrange(1, 40)))
        # partitions (3 per table, truncates in the first) read interleaved at random;
        # one partition's events stay in order
        streams: dict[tuple[str, int], list[SinkEvent]] = {}
        for item in batch:
            key = item.event.get("key")
            partition = 0 if key is None else key["id"] % 3
            streams.setdefault((item.event["source"]["table"], partition), []).append(item)
        with store.transaction():
            stage.preload([(item, ("public", item.event["source"]["table"])) for item in batch])
            while streams:
                where = shop.random.choice(list(streams))
                item = streams[where].pop(0)
                if not streams[where]:
                    del streams[where]
                stage.apply(item, ("public", where[0]))
        _materialize(stage, documents)
        assert documents["orders"] == shop.expected(SHOP)
        assert documents["orders_required"] == shop.expected(REQUIRED)
    store.close()


def test_the_store_survives_a_reopen_with_offsets_pending_and_versions(tmp_path: Path) -> None:
    path = tmp_path / "joins.sqlite"
    store = JoinStore(path, store_indexes([SHOP]))
    stage = JoinStage([SHOP], store)
    shop = Shop(7)
    with store.transaction():
        for item in shop.sink_events(shop.events(30)):
            stage.apply(item, ("public", item.event["source"]["table"]))
        store.set_offsets({TopicPartition("app.public.orders", 0): 31})
        store.set_offsets({TopicPartition("app.public.orders", 0): 12})  # never back
        first = store.versions(3, at_least=100)
    pending = store.pending()
    store.close()
    again = JoinStore(path, store_indexes([SHOP]))
    assert again.pending() == pending and pending
    assert again.next_offsets() == {TopicPartition("app.public.orders", 0): 31}
    assert again.versions(1, at_least=0) == first + 3
    assert again.versions(1, at_least=10_000) == 10_000
    again.close()


def test_a_rolled_back_batch_leaves_nothing(tmp_path: Path) -> None:
    store = JoinStore(tmp_path / "joins.sqlite", store_indexes([SHOP]))
    stage = JoinStage([SHOP], store)
    shop = Shop(3)
    events = shop.sink_events(shop.events(20))
    with pytest.raises(RuntimeError), store.transaction():
        for item in events:
            stage.apply(item, ("public", item.event["source"]["table"]))
        raise RuntimeError("crash before the commit")
    assert store.pending() == {}
    assert store.rows_before(("public", "orders"), Position(2**62, 0)) == []
    store.close()


def test_rows_and_links_written_at_the_commit_are_read_before_it(tmp_path: Path) -> None:
    store = JoinStore(tmp_path / "joins.sqlite", [(("public", "items"), ("order_id",))])
    items = ("public", "items")
    one, two = key_bytes({"id": 1}), key_bytes({"id": 2})
    with store.transaction():
        store.put(items, one, {"id": 1, "order_id": 7}, None, Position(1, 0))
        assert store.matching_keys(items, ("order_id",), (7,)) == [one]  # not yet in SQL
        store.put(items, two, {"id": 2, "order_id": 7}, None, Position(1, 1))
        store.put(items, one, {"id": 1, "order_id": 8}, {"id": 1, "order_id": 7},
                  Position(1, 2))
        assert store.matching_keys(items, ("order_id",), (7,)) == [two]  # the cached list
        assert store.position(items, one) == Position(1, 2)
    with store.transaction(durable=True):
        assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        store.put(items, two, None, {"id": 2, "order_id": 7}, Position(2, 0))
        assert store.row(items, two) is None and store.position(items, two) == Position(0, 0)
    store.close()
    reopened = JoinStore(tmp_path / "joins.sqlite", [(items, ("order_id",))])
    assert reopened.rows_of(items, [one, two]) == {one: {"id": 1, "order_id": 8}}
    assert reopened.matching_many(items, ("order_id",), [7, 8]) == {
        8: [({"id": 1}, {"id": 1, "order_id": 8})]}
    assert reopened.matching_many(items, ("order_id",), [7]) == {}
    store.close()
    reopened.close()


class _RecordingSink:
    """An inner sink that keeps what it is given."""

    def __init__(self) -> None:
        self.written: list[SinkEvent] = []

    def open(self) -> None:
        pass

    def write(self, batch: Sequence[SinkEvent]) -> WriteResult:
        self.written.extend(batch)
        return WriteResult()

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_join_on_other_columns_is_indexed_again_and_its_records_written(
        tmp_path: Path) -> None:
    path = tmp_path / "joins.sqlite"
    store = JoinStore(path, store_indexes([SHOP]))
    assert store.reindexed == set()  # a new store: nothing to index again
    stage = JoinStage([SHOP], store)
    shop = Shop(5)
    with store.transaction():
        for item in shop.sink_events(shop.events(60)):
            stage.apply(item, ("public", item.event["source"]["table"]))
        store.clear_pending()
    store.close()
    # the customer now joined on the order's own id (orders.customer_id no longer indexed)
    changed = JoinedView.model_validate({
        **SHOP.model_dump(include={"source", "target", "exclude", "computed", "nested"}),
        "lookups": [{"name": "customer", "source": "public.customers", "on": {"id": "id"},
                     "fields": ["name", "email"]}]})
    again = JoinStore(path, store_indexes([changed]))
    assert again.reindexed == {"public.orders"}
    inner = _RecordingSink()
    sink = JoinedSink(cast(Sink, inner), JoinStage([changed], again), lambda s, t: f"{s}.{t}",
                      set(), batch_size=500)
    sink.open()
    written = {orjson.dumps(item.event["key"]): item.event["after"] for item in inner.written}
    assert written == shop.expected(changed) and written != shop.expected(SHOP)
    assert not again.has_pending()
    sink.close()
    assert JoinStore(path, store_indexes([changed])).reindexed == set()  # done once


class _FlakySink:
    """An inner sink that refuses its second write, and notes two writes at once."""

    def __init__(self) -> None:
        self.pages: list[list[SinkEvent]] = []
        self.calls = 0
        self.busy = False
        self.overlapped = False

    def write(self, batch: Sequence[SinkEvent]) -> WriteResult:
        self.overlapped |= self.busy
        self.busy = True
        try:
            time.sleep(0.01)
            self.calls += 1
            if self.calls == 2:
                raise SinkUnavailableError("down for a moment")
            self.pages.append(list(batch))
            return WriteResult()
        finally:
            self.busy = False

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_failed_page_leaves_every_record_pending(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("connectors.joins.sink.RECORDS_PER_WRITE", 2)
    store = JoinStore(tmp_path / "joins.sqlite", store_indexes([SHOP]))
    stage = JoinStage([SHOP], store)
    inner = _FlakySink()
    sink = JoinedSink(cast(Sink, inner), stage, lambda s, t: f"{s}.{t}", set(), batch_size=500)
    events = [SinkEvent(_message("app.public.orders", 0, number),
                        {"op": "c", "key": {"id": number}, "before": None,
                         "after": {"id": number, "customer_id": None, "note": "n"},
                         "source": {"schema": "public", "table": "orders"}}, number)
              for number in range(1, 8)]
    with pytest.raises(SinkUnavailableError):
        sink.write(events)
    assert not inner.overlapped and store.has_pending()
    assert len(store.pending()["orders"]) == 7
    assert sink.write_deferred() == [] and not store.has_pending()
    written = [item for page in inner.pages for item in page]
    assert sorted(item.event["key"]["id"] for item in written[2:]) == list(range(1, 8))
    versions = [item.version for item in written]
    assert versions == sorted(set(versions))  # the rewrite's versions are above the first's
    sink.close()


def test_the_pending_records_versions_are_handed_out_in_one_durable_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of records are built after one commit of all their versions (one fsync for
    a write of many pages), each version above every one before."""
    monkeypatch.setattr("connectors.joins.sink.RECORDS_PER_WRITE", 2)
    store = JoinStore(tmp_path / "joins.sqlite", store_indexes([SHOP]))
    handed: list[int] = []
    versions = store.versions

    def counted(count: int, at_least: int) -> int:
        handed.append(count)
        return versions(count, at_least)

    monkeypatch.setattr(store, "versions", counted)
    inner = _FlakySink()
    inner.calls = 2  # never refuses
    sink = JoinedSink(cast(Sink, inner), JoinStage([SHOP], store), lambda s, t: f"{s}.{t}",
                      set(), batch_size=500)
    events = [SinkEvent(_message("app.public.orders", 0, number),
                        {"op": "c", "key": {"id": number}, "before": None,
                         "after": {"id": number, "customer_id": None, "note": "n"},
                         "source": {"schema": "public", "table": "orders"}}, number)
              for number in range(1, 8)]
    sink.write(events)  # a batch not full: its records are written at once
    built = [item for page in inner.pages for item in page if item.message.offset == -1]
    assert len(built) == 7 and max(map(len, inner.pages)) == 2
    assert handed == [7]
    written = sorted(built, key=lambda item: item.version)
    assert [item.version for item in written] == list(range(written[0].version,
                                                             written[0].version + 7))
    assert written[0].version >= 7  # at least every event's version
    sink.close()


def test_a_partition_sent_back_is_admitted_from_its_next_record(tmp_path: Path) -> None:
    sink = _joined_sink(tmp_path)
    where = TopicPartition("app.public.orders", 0)
    consumer = _Consumer({where})
    sink.resume = {where: 12}  # the store stops at 12: a Kafka transaction's marker
    batch = [_message("app.public.orders", 0, 13)]
    assert sink.admit(batch, cast(Consumer, consumer), lambda _: 0, lambda _: 1) == []
    assert consumer.seeks == [(where, 12)]
    # read again from 12, the first record is 13: nothing lies between
    assert sink.admit(batch, cast(Consumer, consumer), lambda _: 0, lambda _: 1) == batch
    assert consumer.seeks == [(where, 12)]
    sink.store.close()


class _Consumer:
    """The part of a consumer ``JoinedSink.admit`` uses."""

    def __init__(self, held: set[TopicPartition]) -> None:
        self.held = held
        self.seeks: list[tuple[TopicPartition, int]] = []

    def assignment(self) -> set[TopicPartition]:
        return self.held

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self.seeks.append((partition, offset))


def _joined_sink(tmp_path: Path) -> JoinedSink:
    store = JoinStore(tmp_path / "joins.sqlite", store_indexes([SHOP]))
    return JoinedSink(cast(Sink, None), JoinStage([SHOP], store), lambda s, t: f"{s}.{t}",
                      set(), batch_size=500)


def _message(topic: str, partition: int, offset: int) -> Message:
    return Message(topic, partition, offset, 0, b"", b"{}", Position(offset, 0), False)


def test_a_new_store_reads_a_partition_from_its_start(tmp_path: Path) -> None:
    sink = _joined_sink(tmp_path)
    parts = {TopicPartition("app.public.orders", 0), TopicPartition("app.public.orders", 1)}
    consumer = _Consumer(parts)
    batch = [_message("app.public.orders", 0, 40), _message("app.public.orders", 1, 3)]
    admitted = sink.admit(batch, cast(Consumer, consumer), lambda where: 3, lambda topic: 2)
    assert admitted == [batch[1]]  # partition 0 was read from 40: sent back to 3
    assert consumer.seeks == [(TopicPartition("app.public.orders", 0), 3)]
    sink.store.close()


def test_a_member_holding_part_of_a_topic_waits_then_stops(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("connectors.joins.sink.SPLIT_PAUSE_S", 0.0)
    sink = _joined_sink(tmp_path)
    orders = [TopicPartition("app.public.orders", n) for n in range(3)]
    consumer = _Consumer({orders[1]})  # a crashed member still holds 0 and 2
    batch = [_message("app.public.orders", 1, 5), _message("app.public.orders", 1, 6),
             _message("app.public.customers", 0, 0)]
    admitted = sink.admit(batch, cast(Consumer, consumer), lambda where: 0,
                          lambda topic: 3 if topic.endswith("orders") else 1)
    assert admitted == []  # the orders sent back to 5; customers: not held at all
    assert (orders[1], 5) in consumer.seeks
    consumer.held = {*orders, TopicPartition("app.public.customers", 0)}  # rebalanced
    assert sink.admit(batch[:2], cast(Consumer, consumer), lambda where: 5,
                      lambda topic: 3) == batch[:2]
    consumer.held = {orders[1]}  # another process runs the same connector
    monkeypatch.setattr("connectors.joins.sink.SPLIT_GRACE_S", 0.0)
    with pytest.raises(SplitJoinError, match=r"holds \[1\] of its 3"):
        sink.admit(batch[:1], cast(Consumer, consumer), lambda where: 0, lambda topic: 3)
    sink.store.close()


def _loading(table: str, ids: Sequence[int], offset: int) -> list[SinkEvent]:
    """Snapshot reads of ``ids`` (an initial load), at offsets from ``offset``."""
    def row(key: int) -> dict[str, Any]:
        if table == "orders":
            return {"id": key, "customer_id": 1, "note": "n"}
        return {"id": key, "name": f"c{key}", "email": "e"}

    return [SinkEvent(Message(f"app.public.{table}", 0, offset + n, 0, b"", b"{}",
                              Position(offset + n + 1, 0), False),
                      {"op": "r", "key": {"id": key}, "before": None, "after": row(key),
                       "source": {"schema": "public", "table": table}}, offset + n + 1)
            for n, key in enumerate(ids)]


def test_loading_batches_share_a_transaction_and_a_failed_one_is_undone_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "joins.sqlite"
    store = JoinStore(path, store_indexes([SHOP]))
    inner = _RecordingSink()
    sink = JoinedSink(cast(Sink, inner), JoinStage([SHOP], store), lambda s, t: f"{s}.{t}",
                      set(), batch_size=3)
    sink.write(_loading("orders", [1, 2, 3], 0))  # full batches of reads: deferred, held
    sink.write(_loading("orders", [4, 5, 6], 3))
    assert store.held and inner.written == []
    with closing(sqlite3.connect(path)) as committed:  # what a crash now would leave
        assert committed.execute("SELECT count(*) FROM offsets").fetchone() == (0,)
        assert committed.execute("SELECT count(*) FROM pending").fetchone() == (0,)

    apply = JoinStage.apply

    def failing(stage: JoinStage, event: SinkEvent, table: tuple[str, str],
                touch: bool = True) -> int:
        if event.event["key"]["id"] == 8:
            raise OSError("a failure in the middle of a batch")
        return apply(stage, event, table, touch)

    monkeypatch.setattr(JoinStage, "apply", failing)
    with pytest.raises(OSError):
        sink.write(_loading("orders", [7, 8, 9], 6))
    monkeypatch.setattr(JoinStage, "apply", apply)
    assert store.held and store.row(("public", "orders"), key_bytes({"id": 7})) is None
    assert store.row(("public", "orders"), key_bytes({"id": 6})) is not None  # the held ones stay
    sink.write(_loading("orders", [7, 8, 9], 6))  # the retry
    sink.write(_loading("customers", [1], 0))  # not full: caught up, records written
    assert not store.held
    written = {item.event["key"]["id"]: item.event["after"] for item in inner.written}
    assert sorted(written) == list(range(1, 10))
    assert all(record["customer"] == {"name": "c1", "email": "e"}
               for record in written.values())
    sink.flush()
    sink.close()
    again = JoinStore(path, store_indexes([SHOP]))
    assert again.next_offsets() == {TopicPartition("app.public.orders", 0): 9,
                                    TopicPartition("app.public.customers", 0): 1}
    assert not again.has_pending()
    again.close()


class _CommitFails:
    """A SQLite connection whose COMMITs fail (a disk gone bad)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def execute(self, statement: str, *args: Any) -> sqlite3.Cursor:
        if statement == "COMMIT":
            raise sqlite3.OperationalError("disk I/O error")
        return self.db.execute(statement, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


def test_held_batches_lost_stop_the_sink_and_are_read_again_from_the_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("connectors.joins.sink.HOLD_EVENTS", 6)
    path = tmp_path / "joins.sqlite"
    store = JoinStore(path, store_indexes([SHOP]))
    sink = JoinedSink(cast(Sink, _RecordingSink()), JoinStage([SHOP], store),
                      lambda s, t: f"{s}.{t}", set(), batch_size=3)
    sink.write(_loading("orders", [1, 2, 3], 0))
    store._db = cast(sqlite3.Connection, _CommitFails(store._db))
    with pytest.raises(SinkStateLostError, match="disk I/O error"):
        sink.write(_loading("orders", [4, 5, 6], 3))  # 6 events held: committed, failing
    assert not store.held and store.row(("public", "orders"), key_bytes({"id": 1})) is None
    with pytest.raises(SinkStateLostError):  # never applied over the gap
        sink.write(_loading("orders", [7], 6))
    with pytest.raises(SinkStateLostError):
        sink.flush()
    with pytest.raises(SinkStateLostError):
        sink.write_deferred()
    sink.close()
    again = JoinStore(path, store_indexes([SHOP]))
    # a new sink resumes from the store: partition 0 is read from its start again
    assert again.next_offsets() == {} and not again.has_pending()
    again.close()


def test_a_failing_store_is_retried_and_never_the_events_fault(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store that fails (a locked database, a full disk) makes the write fail as a sink
    that is unavailable: retried until it passes, never split into dead letters (the
    store would then lack those events for good)."""
    store = JoinStore(tmp_path / "joins.sqlite", store_indexes([SHOP]))
    inner = _RecordingSink()
    sink = JoinedSink(cast(Sink, inner), JoinStage([SHOP], store), lambda s, t: f"{s}.{t}",
                      set(), batch_size=500)
    apply = JoinStage.apply

    def locked(stage: JoinStage, event: SinkEvent, table: tuple[str, str],
               touch: bool = True) -> int:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(JoinStage, "apply", locked)
    batch = _loading("orders", [1, 2], 0)
    with pytest.raises(SinkUnavailableError, match="state store failed: database is locked"):
        sink.write(batch)
    assert store.row(("public", "orders"), key_bytes({"id": 1})) is None and inner.written == []
    monkeypatch.setattr(JoinStage, "apply", apply)
    sink.write(batch)  # the retry: applied, its records written
    assert sorted(item.event["key"]["id"] for item in inner.written) == [1, 2]
    sink.close()


def _filled(seed: int) -> Shop:
    """A shop whose tables hold some hundreds of rows (a snapshot to read)."""
    shop = Shop(seed)
    for table, count in (("customers", 30), ("products", 20), ("orders", 120), ("items", 300)):
        for _ in range(count):
            shop.tables[table][shop.next_id] = shop._row(table, shop.next_id)
            shop.next_id += 1
    return shop


def _snapshot_reads(shop: Shop, raw: bool = True) -> list[SinkEvent]:
    """Every row of ``shop`` as a snapshot read (``r``), the tables' reads interleaved at
    random (each topic is read on its own), children before their parents too."""
    reads = [(table, {"op": "r", "key": {"id": key}, "after": row})
             for table, rows in shop.tables.items() for key, row in rows.items()]
    shop.random.shuffle(reads)
    return shop.sink_events(reads, raw)


def _documents(inner: _RecordingSink) -> dict[bytes, dict[str, Any]]:
    """The records ``inner`` holds last per key (a delete removes it)."""
    documents: dict[bytes, dict[str, Any]] = {}
    for item in sorted(inner.written, key=lambda item: item.version):
        key = orjson.dumps(item.event["key"])
        if item.event["after"] is None:
            documents.pop(key, None)
        else:
            documents[key] = item.event["after"]
    return documents


@pytest.mark.parametrize("raw", [True, False], ids=["native", "python"])
@pytest.mark.parametrize("seed", range(4))
def test_an_initial_load_marks_its_records_once_it_ends(tmp_path: Path, seed: int,
                                                        raw: bool) -> None:
    """Snapshot reads into a new store are applied without marking a record per event;
    when the load ends (a batch not full, or another kind of event) every root row's
    record is written, then events mark what they touch as before. ``raw``: the reads
    are the native core's (from their JSON), else Python's."""
    store = JoinStore(tmp_path / "joins.sqlite", store_indexes([SHOP]))
    inner = _RecordingSink()
    sink = JoinedSink(cast(Sink, inner), JoinStage([SHOP], store), lambda s, t: f"{s}.{t}",
                      set(), batch_size=50)
    sink.open()
    shop = _filled(seed)
    reads = _snapshot_reads(shop, raw)
    full = len(reads) // 50 * 50
    for start in range(0, full, 50):
        sink.write(reads[start:start + 50])
        assert store.loading() == {"orders"} and not store.has_pending()
    assert inner.written == []  # full batches of snapshot reads write nothing
    if seed % 2:  # the load ends with a batch not full
        sink.write(reads[full:] or reads[-1:])
    else:  # … or with another kind of event (the snapshot's rest first)
        sink.write(reads[full:])
        sink.write(shop.sink_events(shop.events(1)))
    sink.flush()
    assert store.loading() == set()
    assert _documents(inner) == shop.expected(SHOP)
    for _ in range(5):  # then every event marks the records it touches
        sink.write(shop.sink_events(shop.events(30)))
        sink.flush()
        assert _documents(inner) == shop.expected(SHOP)
    sink.close()


def test_a_load_stopped_half_way_writes_its_records_at_the_next_start(tmp_path: Path) -> None:
    path = tmp_path / "joins.sqlite"
    inner = _RecordingSink()
    sink = JoinedSink(cast(Sink, inner), JoinStage([SHOP], JoinStore(path, store_indexes([SHOP]))),
                      lambda s, t: f"{s}.{t}", set(), batch_size=50)
    sink.open()
    shop = _filled(3)
    reads = _snapshot_reads(shop)
    for start in range(0, 200, 50):
        sink.write(reads[start:start + 50])
    sink.close()  # commits what it applied; a kill -9 would undo it (the load goes on)
    assert inner.written == []
    again = JoinedSink(cast(Sink, inner), JoinStage([SHOP], JoinStore(path, store_indexes([SHOP]))),
                       lambda s, t: f"{s}.{t}", set(), batch_size=50)
    again.open()  # the records of the 200 rows applied
    assert again.store.loading() == set() and not again.store.has_pending()
    applied = Shop(3)
    applied.tables = {table: {} for table in shop.tables}
    for item in reads[:200]:
        applied.tables[item.event["source"]["table"]][item.event["key"]["id"]] = \
            item.event["after"]
    assert _documents(inner) == applied.expected(SHOP)
    for start in range(200, len(reads), 50):  # the rest: each event marks what it touches
        again.write(reads[start:start + 50])
    again.write_deferred()  # idle: what was deferred
    again.flush()
    assert _documents(inner) == shop.expected(SHOP)
    again.close()


def test_a_load_read_natively_stores_what_python_stores(tmp_path: Path) -> None:
    """The same snapshot reads, from their JSON (the native core) or decoded (Python):
    the same rows, positions and links in the store."""
    stored = []
    for raw in (True, False):
        path = tmp_path / f"joins-{raw}.sqlite"
        sink = JoinedSink(cast(Sink, _RecordingSink()),
                          JoinStage([SHOP], JoinStore(path, store_indexes([SHOP]))),
                          lambda s, t: f"{s}.{t}", set(), batch_size=50)
        sink.open()
        reads = _snapshot_reads(_filled(5), raw)
        assert all((found is not None) == raw for found in CORE.join_loaded_rows(reads))
        for start in range(0, len(reads), 50):
            sink.write(reads[start:start + 50])
        sink.flush()
        sink.close()
        with closing(sqlite3.connect(path)) as db:
            stored.append([db.execute(query).fetchall() for query in (
                "SELECT * FROM rows ORDER BY tbl, key", "SELECT * FROM set_links ORDER BY 1, 2, 3",
                "SELECT * FROM offsets ORDER BY topic, part")])
    assert stored[0] == stored[1] and len(stored[0][0]) == 470
